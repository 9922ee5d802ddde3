"""A memory budget for reverse mode (issue 25): peak memory and time of one gradient step.

Two workloads, each written once for any NumPy-like namespace (tidu, PyTorch, JAX):

- ``mlp``: a residual MLP, 64 layers 256 wide, batch 2048, float32. Each layer is
  ``h = h + 0.1 * (a * a + sin(a))`` with ``a = tanh(h @ w)``; the loss is ``sum(h)``
  and the gradient is taken in the list of the 64 weight matrices. ``h0`` is standard
  normal, each weight normal with standard deviation ``1/sqrt(256)``.
- ``recurrence``: ``h = tanh(h * w + x[t])`` for 10⁴ steps on 64-vectors, float64;
  the loss is ``sum(h)`` and the gradient is taken in ``w`` (64,) and ``h0`` (64,);
  ``x`` is ``(10⁴, 64)``.

``--quick`` (the test suite's size, seconds) runs 16 layers 64 wide at batch 256 (so
that the activations, not the 16 weight gradients, fill the memory, as at full size) and
300 steps.

The configurations (rows):

1. ``tidu jit(grad)``: ``tnp.jit(tnp.grad(loss))``, no budget: the reference. Its
   gradients are what every other row is compared with (``rtol=1e-4`` and an ``atol`` of
   ``1e-4 * max|reference|`` for float32; ``1e-8`` and ``1e-8 * max|reference|`` for
   float64).
2. ``tidu jit(grad), budget P%``: ``tnp.jit(tnp.grad(loss), memory_budget=B)`` for ``B``
   50%, 20% and 5% of row 1's tracemalloc peak (bytes). A budget below the smallest
   feasible one raises a ``tidu.TiduError`` naming it (``smallest_feasible``): the row
   says so, and one more row runs at that smallest budget (the largest one named, if
   several budgets were refused).
3. ``tidu eager Tensor``: ``tnp.tensor(..., requires_grad=True)``, ``loss.backward()``, the
   returned ``Gradients``' ``.grad(t)`` (each ``.grad`` set back to ``None`` after a step),
   with the default checkpoint strategy ``"none"`` (each op keeps what its backward reads),
   then ``, balanced``: the forward under ``tnp.checkpoint_strategy("balanced")``, and
   ``, keeping everything``: every recorded op keeping its inputs and outputs, the tape
   as it was before checkpoint strategies (issue 25's "plain eager"), through an internal
   switch of the frontend.
4. ``torch autograd`` and ``torch checkpoint``: ``torch.autograd.grad``, plain and with
   ``torch.utils.checkpoint.checkpoint_sequential(..., use_reentrant=False)`` over the
   layers (√64 = 8 segments) or the steps (segments of about √n steps).
5. ``jax.jit(grad)`` and ``jax.jit(grad), jax.checkpoint``: JAX on CPU, plain and with
   ``jax.checkpoint(policy=nothing_saveable)`` around each layer (mlp) or each chunk of
   about √n steps (recurrence). JAX runs the recurrence as ``lax.scan`` (a Python loop
   of 10⁴ steps under ``jax.jit`` would take minutes to compile); tidu and PyTorch unroll it.

PyTorch and JAX rows say "not installed" when the library is missing.

Every configuration runs in fresh Python processes (every library on one compute
thread, ``benchmarks/__init__.py``), each making the inputs and calling the step once
first (``first_call_s``: ``jit`` traces, optimizes, plans its budget and compiles there;
``jax.jit`` compiles). At full size, two processes per configuration:

- a memory process, started with ``MALLOC_MMAP_THRESHOLD_=131072``: every block of
  128 KiB or more is mapped on its own and unmapped when freed, so resident memory
  follows the live arrays of every library. (glibc's default moves its threshold up to
  32 MiB once big blocks are freed and then serves them from its heap: there PyTorch's
  resident peak for the full mlp went from 390 to 840 MiB from one step to the next,
  against 264 MiB every step with the threshold fixed from the start.) It reports

  - ``rss_peak_mb``: the median over 3 steps of the peak resident memory over what the
    process held before the step: ``VmHWM`` after it minus ``VmRSS`` before it, the
    high-water mark reset by writing ``5`` to ``/proc/self/clear_refs`` after
    ``malloc_trim(0)``. The column comparable across libraries: tracemalloc does not see
    PyTorch's or XLA's allocations. (Where ``clear_refs`` cannot be written the row
    says it fell back to ``ru_maxrss``, which includes the warm-up.)
  - ``tracemalloc_peak_mb`` (tidu rows): tracemalloc's peak over its baseline during one
    step, tracing started after the inputs exist (NumPy's arrays are traced);
  - ``xla_temp_mb`` (JAX rows): XLA's temporary buffer, from ``memory_analysis()``;

- a timing process under glibc's default ``malloc``: ``ms``, the median of 5 steps
  (tracemalloc off), and ``rss_default_malloc_mb``, the resident peak as above (median
  of 3 steps) with the default ``malloc``: what a user's process sees, heap included.

``--quick`` measures everything in one process per library, with the fixed threshold.
Every peak is taken after ``gc.collect()`` and ``primitives.tensor.release_cached_arrays()``
(tidu's idle cached buffers would otherwise be reused unseen), and includes the gradients
the step returns (64 × 256 KiB = 16 MiB for the full mlp).

Run it::

    python -m benchmarks.memory_budget [--quick] [--json PATH] [--plot PATH.svg]
    python -c "from benchmarks.memory_budget import main; main()"

or call :func:`memory_budget_workload` (``quick: bool``), which returns the rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):                   # python benchmarks/memory_budget.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402  one compute thread, set before NumPy is imported

import argparse  # noqa: E402
import ctypes  # noqa: E402
import ctypes.util  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = "memory budget"
BUDGET_FRACTIONS = (0.5, 0.2, 0.05)
SIZES = {False: {"mlp": {"layers": 64, "width": 256, "batch": 2048},
                 "recurrence": {"steps": 10_000, "dim": 64}},
         True: {"mlp": {"layers": 16, "width": 64, "batch": 256},
                "recurrence": {"steps": 300, "dim": 64}}}
REPEAT = {False: 5, True: 2}
RSS_STEPS = 3                   # steps whose resident peak is taken (the median is reported)
MMAP_THRESHOLD = 1 << 17        # bytes: MALLOC_MMAP_THRESHOLD_ of the processes taking peaks
MALLOC_NOTE = f"MALLOC_MMAP_THRESHOLD_={MMAP_THRESHOLD}"

TIDU_JIT, TIDU_BUDGET, TIDU_EAGER = "tidu jit(grad)", "tidu jit(grad), budget", "tidu eager Tensor"
TIDU_BALANCED = "tidu eager Tensor, balanced"
TIDU_EVERYTHING = "tidu eager Tensor, keeping everything"
TORCH, TORCH_CHECKPOINT = "torch autograd", "torch checkpoint"
JAX, JAX_CHECKPOINT = "jax.jit(grad)", "jax.jit(grad), jax.checkpoint"
LIBRARY = {TIDU_JIT: "tidu", TIDU_BUDGET: "tidu", TIDU_EAGER: "tidu", TIDU_BALANCED: "tidu",
           TIDU_EVERYTHING: "tidu",
           TORCH: "torch",
           TORCH_CHECKPOINT: "torch", JAX: "jax", JAX_CHECKPOINT: "jax"}


# --- the workloads, written once for a namespace ``xp`` (tnp, torch or jax.numpy) --------------


def mlp_layer(xp, h, w):
    a = xp.tanh(h @ w)
    return h + 0.1 * (a * a + xp.sin(a))


def mlp_loss(xp, weights, h):
    for w in weights:
        h = mlp_layer(xp, h, w)
    return xp.sum(h)


def recurrence_step(xp, h, w, x):
    return xp.tanh(h * w + x)


def recurrence_loss(xp, w, h0, xs):
    h = h0
    for t in range(xs.shape[0]):
        h = recurrence_step(xp, h, w, xs[t])
    return xp.sum(h)


def make_inputs(workload: str, sizes: dict, seed: int = 0) -> dict:
    """NumPy inputs, the same in every process: ``mlp``: ``weights`` (a list), ``h0``;
    ``recurrence``: ``w``, ``h0``, ``xs``."""
    rng = np.random.default_rng(seed)
    if workload == "mlp":
        width, batch = sizes["width"], sizes["batch"]
        weights = [(rng.standard_normal((width, width)) / math.sqrt(width)).astype(np.float32)
                   for _ in range(sizes["layers"])]
        return {"weights": weights,
                "h0": rng.standard_normal((batch, width)).astype(np.float32)}
    dim = sizes["dim"]
    return {"w": rng.uniform(0.5, 1.0, dim), "h0": rng.standard_normal(dim),
            "xs": 0.5 * rng.standard_normal((sizes["steps"], dim))}


def chunk_length(steps: int) -> int:
    """The divisor of ``steps`` closest to √steps (so the chunks are equal)."""
    divisors = [d for d in range(1, steps + 1) if steps % d == 0]
    return min(divisors, key=lambda d: (abs(d - math.sqrt(steps)), d))


# --- each configuration's step: () -> the gradients as a list of NumPy arrays -------------------


def tidu_jit_step(workload: str, inputs: dict, budget: int | None):
    import primitives.tensor as tnp

    options = {} if budget is None else {"memory_budget": budget}
    if workload == "mlp":
        step = tnp.jit(tnp.grad(functools.partial(mlp_loss, tnp)), **options)
        weights, h0 = inputs["weights"], inputs["h0"]
        return lambda: list(step(weights, h0))
    step = tnp.jit(tnp.grad(functools.partial(recurrence_loss, tnp), argnums=(0, 1)), **options)
    w, h0, xs = inputs["w"], inputs["h0"], inputs["xs"]
    return lambda: list(step(w, h0, xs))


def tidu_eager_step(workload: str, inputs: dict, strategy: str | None = "none"):
    import primitives.tensor as tnp

    from primitives.tensor.eager import strategy as strategies

    if workload == "mlp":
        params = [tnp.tensor(w, requires_grad=True) for w in inputs["weights"]]
        args = (params, tnp.tensor(inputs["h0"]))
        loss = functools.partial(mlp_loss, tnp)
    else:
        params = [tnp.tensor(inputs["w"], requires_grad=True),
                  tnp.tensor(inputs["h0"], requires_grad=True)]
        args = (*params, tnp.tensor(inputs["xs"]))
        loss = functools.partial(recurrence_loss, tnp)

    def step():
        if strategy is None:
            # The tape as it was before checkpoint strategies (every recorded op keeps its
            # inputs and outputs): the frontend's process-wide strategy set to none at all,
            # an internal switch, for this comparison only.
            saved, strategies.process_strategy[0] = strategies.process_strategy[0], None
            try:
                value = loss(*args)
            finally:
                strategies.process_strategy[0] = saved
        else:
            with tnp.checkpoint_strategy(strategy):
                value = loss(*args)
        grads = value.backward()
        out = [grads.grad(p) for p in params]
        for p in params:
            p.grad = None
        return out
    return step


def torch_step(workload: str, inputs: dict, checkpointed: bool):
    torch = benchmarks.torch_threads()
    from torch.utils.checkpoint import checkpoint_sequential

    if workload == "mlp":
        params = [torch.tensor(w, requires_grad=True) for w in inputs["weights"]]
        h0 = torch.tensor(inputs["h0"])
        functions = [functools.partial(_torch_layer, torch, w) for w in params]
        segments = math.isqrt(len(functions))
    else:
        params = [torch.tensor(inputs["w"], requires_grad=True),
                  torch.tensor(inputs["h0"], requires_grad=True)]
        h0, xs = params[1], torch.tensor(inputs["xs"])
        functions = [functools.partial(_torch_recurrence_step, torch, params[0], xs[t])
                     for t in range(xs.shape[0])]
        segments = len(functions) // chunk_length(len(functions))

    def step():
        if checkpointed:
            h = checkpoint_sequential(functions, segments, h0, use_reentrant=False)
        else:
            h = h0
            for f in functions:
                h = f(h)
        return [g.numpy() for g in torch.autograd.grad(torch.sum(h), params)]
    return step


def _torch_layer(torch, w, h):
    return mlp_layer(torch, h, w)


def _torch_recurrence_step(torch, w, x, h):
    return recurrence_step(torch, h, w, x)


def jax_step(workload: str, inputs: dict, checkpointed: bool):
    jax = benchmarks.start_jax()
    jax.config.update("jax_enable_x64", True)            # the recurrence is float64
    jnp = jax.numpy
    policy = jax.checkpoint_policies.nothing_saveable
    if workload == "mlp":
        layer = functools.partial(mlp_layer, jnp)
        if checkpointed:
            layer = jax.checkpoint(layer, policy=policy)

        def loss(weights, h):
            for w in weights:
                h = layer(h, w)
            return jnp.sum(h)
        grad = jax.jit(jax.grad(loss))
        args = ([jnp.asarray(w) for w in inputs["weights"]], jnp.asarray(inputs["h0"]))
    else:
        chunk = chunk_length(inputs["xs"].shape[0])

        def steps(w, h, xs):                             # a lax.scan over xs's rows
            return jax.lax.scan(lambda h, x: (recurrence_step(jnp, h, w, x), None), h, xs)[0]

        def loss(w, h0, xs):
            if not checkpointed:
                return jnp.sum(steps(w, h0, xs))
            chunks = xs.reshape(-1, chunk, xs.shape[1])
            run = jax.checkpoint(steps, policy=policy)
            return jnp.sum(jax.lax.scan(lambda h, c: (run(w, h, c), None), h0, chunks)[0])
        grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
        args = tuple(jnp.asarray(inputs[k]) for k in ("w", "h0", "xs"))

    def step():
        out = jax.block_until_ready(grad(*args))
        return [np.asarray(g) for g in out]
    step.xla_temp_bytes = lambda: grad.lower(*args).compile().memory_analysis().temp_size_in_bytes
    return step


def build_step(spec: dict, inputs: dict):
    config, workload = spec["config"], spec["workload"]
    if config in (TIDU_JIT, TIDU_BUDGET):
        return tidu_jit_step(workload, inputs, spec.get("budget"))
    if config in (TIDU_EAGER, TIDU_BALANCED, TIDU_EVERYTHING):
        return tidu_eager_step(workload, inputs, {TIDU_EAGER: "none", TIDU_BALANCED: "balanced",
                                                  TIDU_EVERYTHING: None}[config])
    if config in (TORCH, TORCH_CHECKPOINT):
        return torch_step(workload, inputs, config == TORCH_CHECKPOINT)
    return jax_step(workload, inputs, config == JAX_CHECKPOINT)


# --- measuring one configuration, in this process ----------------------------------------------


def _reset_peak_rss() -> bool:
    """Reset ``VmHWM`` to the current resident size (Linux ≥ 4.0); ``False`` if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def _malloc_trim() -> None:
    """Give glibc's free memory back to the OS, so a step cannot reuse it unseen."""
    name = ctypes.util.find_library("c")
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


def _settle() -> None:
    gc.collect()
    if "primitives.tensor" in sys.modules:
        sys.modules["primitives.tensor"].release_cached_arrays()


def rss_peak(step) -> tuple[int, str]:
    """Peak resident bytes over the resident size before one call of ``step``, and how."""
    _settle()
    _malloc_trim()
    if _reset_peak_rss() and benchmarks.status_bytes("VmHWM") is not None:
        before = benchmarks.status_bytes("VmRSS")
        result = step()
        peak, method = benchmarks.status_bytes("VmHWM"), "VmHWM - VmRSS before, reset by clear_refs"
    else:
        before = benchmarks.status_bytes("VmRSS") or 0
        result = step()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak *= 1 if sys.platform == "darwin" else 1024
        method = "ru_maxrss - VmRSS before (includes the warm-up)"
    del result
    return peak - before, method


def rss_peaks(step, count: int = RSS_STEPS) -> dict:
    """:func:`rss_peak` of ``count`` steps: the median and the range, in MiB."""
    peaks, methods = zip(*(rss_peak(step) for _ in range(count)))
    mib = sorted(p / 2**20 for p in peaks)
    return {"median": statistics.median(mib), "range": [mib[0], mib[-1]], "method": methods[0]}


def traced_peak(step) -> int:
    """tracemalloc's peak over its baseline during one call of ``step``."""
    _settle()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = step()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return peak - base


def median_seconds(step, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_here(spec: dict) -> dict:
    """One configuration in this process, after a first call (which traces or compiles):
    ``spec["measure"]`` is ``"time"`` (the median step), ``"memory"`` (the peaks; the
    gradients saved to ``spec["grads"]``, an ``.npz``) or ``"both"``. A budget below the
    smallest feasible one is reported as ``error`` and ``smallest_feasible_bytes``."""
    from tidu import TiduError

    inputs = make_inputs(spec["workload"], spec["sizes"])
    step = build_step(spec, inputs)
    start = time.perf_counter()
    try:
        grads = step()                           # jit traces here, jax.jit compiles
    except TiduError as error:
        if not hasattr(error, "smallest_feasible"):
            raise
        return {"error": f"{type(error).__name__}: {error}",
                "smallest_feasible_bytes": int(error.smallest_feasible)}
    result = {"first_call_s": time.perf_counter() - start}
    if spec["measure"] != "time":
        np.savez(spec["grads"], *grads)
    del grads
    if spec["measure"] != "memory":
        result["ms"] = 1e3 * median_seconds(step, spec["repeat"])
    if spec["measure"] == "time":
        result["rss_default_malloc_mb"] = rss_peaks(step)["median"]
        return result
    rss = rss_peaks(step)
    result.update(rss_peak_mb=rss["median"], rss_peak_range_mb=rss["range"],
                  rss_method=rss["method"] + (f", {spec['malloc']}" if "malloc" in spec else ""))
    if LIBRARY[spec["config"]] == "tidu":
        result["tracemalloc_peak_bytes"] = traced_peak(step)
        result["tracemalloc_peak_mb"] = result["tracemalloc_peak_bytes"] / 2**20
    if hasattr(step, "xla_temp_bytes"):
        result["xla_temp_mb"] = step.xla_temp_bytes() / 2**20
    return result


def _child() -> None:
    """``--child``: read a list of specs (JSON) on stdin, print their results (JSON)."""
    benchmarks.hold_threads()
    specs = json.loads(sys.stdin.read())
    print(json.dumps([measure_here(spec) for spec in specs]))


# --- the parent: fresh processes, rows ----------------------------------------------------------


def run_apart(specs: list[dict]) -> list[dict]:
    """:func:`measure_here` for each spec, in order, in one fresh Python process (its
    ``malloc`` set up as the first spec's ``measure`` asks). A process that fails gives each
    of its specs ``{"error": ...}`` (its exit status and the end of its stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if specs[0]["measure"] != "time":
        env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-m",
                           "benchmarks.memory_budget", "--child"],
                          input=json.dumps(specs), capture_output=True, text=True, cwd=ROOT,
                          env=env)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return [{"error": f"process failed (exit status {done.returncode}): {tail}"}
                for _ in specs]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _describe(workload: str, sizes: dict) -> str:
    if workload == "mlp":
        return (f"mlp {sizes['layers']} layers x {sizes['width']}, batch {sizes['batch']}, "
                "float32")
    return f"recurrence {sizes['steps']:,} steps x {sizes['dim']}, float64"


def _case(workload: str, config: str, sizes: dict, budget_label: str = "") -> str:
    detail = {TORCH_CHECKPOINT: (f"checkpoint_sequential, {math.isqrt(sizes['layers'])} segments"
                                 if workload == "mlp" else
                                 f"checkpoint_sequential, {chunk_length(sizes['steps'])}-step "
                                 "segments"),
              JAX_CHECKPOINT: ("jax.checkpoint per layer" if workload == "mlp" else
                               f"jax.checkpoint per {chunk_length(sizes['steps'])} steps, "
                               "lax.scan"),
              JAX: "" if workload == "mlp" else "lax.scan"}.get(config, "")
    name = {TORCH_CHECKPOINT: "torch", JAX_CHECKPOINT: "jax.jit(grad)"}.get(config, config)
    if config == TIDU_BUDGET:
        name = f"tidu jit(grad), budget {budget_label}"
    return f"{workload}: {name}" + (f" ({detail})" if detail else "")


def _load(path: str) -> list[np.ndarray]:
    with np.load(path) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def _grads_check(path: str, reference: list[np.ndarray]) -> tuple[bool, str]:
    grads = _load(path)
    if len(grads) != len(reference):
        return False, f"{len(grads)} gradients, the reference has {len(reference)}"
    worst, agree = 0.0, True
    for got, want in zip(grads, reference):
        rtol = 1e-4 if want.dtype == np.float32 else 1e-8
        scale = float(np.max(np.abs(want))) or 1.0
        agree &= got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol,
                                                              atol=rtol * scale))
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))) / scale)
    return agree, ("identical" if worst == 0 else f"max |diff| / max |ref| = {worst:.1e}")


class _Runner:
    """Measures specs in fresh processes. Full sizes: each configuration twice, in a
    process of its own each: once timed under glibc's default ``malloc``, once for its
    peaks with a fixed mmap threshold. ``quick``: both at once, the specs of a batch
    (one library) in one process with the fixed threshold."""

    def __init__(self, quick: bool, directory: str) -> None:
        self.quick, self.directory, self.count = quick, directory, 0

    def spec(self, workload: str, config: str, budget: int | None = None) -> dict:
        self.count += 1
        return {"workload": workload, "config": config, "budget": budget,
                "sizes": SIZES[self.quick][workload], "repeat": REPEAT[self.quick],
                "grads": os.path.join(self.directory, f"grads{self.count}.npz")}

    def run(self, specs: list[dict]) -> list[dict]:
        if not specs:
            return []
        if self.quick:
            return run_apart([dict(spec, measure="both", malloc=MALLOC_NOTE) for spec in specs])
        results = []
        for spec in specs:
            [memory] = run_apart([dict(spec, measure="memory", malloc=MALLOC_NOTE)])
            if "error" not in memory:             # the timing process's first call wins
                [timed] = run_apart([dict(spec, measure="time")])
                memory.update(timed)
            results.append(memory)
        return results


def memory_budget_workload(quick: bool) -> list[dict]:
    """The rows: for each workload, tidu's jit (no budget, then each budget), tidu's eager
    Tensor, PyTorch and JAX (plain and checkpointed), each measured in fresh processes."""
    workloads = ("mlp", "recurrence")
    with tempfile.TemporaryDirectory(prefix="tidu-memory-budget-") as directory:
        runner = _Runner(quick, directory)
        # 1. the reference: jit(grad), no budget
        ref_specs = [runner.spec(w, TIDU_JIT) for w in workloads]
        ref_results = runner.run(ref_specs)
        for workload, result in zip(workloads, ref_results):
            if "error" in result:
                raise RuntimeError(f"memory budget: {workload} {TIDU_JIT} failed: "
                                   f"{result['error']}")
        # 2-5. the budgets (fractions of the reference's tracemalloc peak), the eager
        # Tensor and the peers; grouped by library (quick runs a library in one process)
        planned, batches = [], {}
        for workload, ref in zip(workloads, ref_results):
            for fraction in BUDGET_FRACTIONS:
                budget = int(fraction * ref["tracemalloc_peak_bytes"])
                spec = runner.spec(workload, TIDU_BUDGET, budget)
                planned.append((workload, TIDU_BUDGET, f"{fraction:.0%}", budget, spec))
            for config in (TIDU_EAGER, TIDU_BALANCED, TIDU_EVERYTHING, TORCH,
                           TORCH_CHECKPOINT, JAX, JAX_CHECKPOINT):
                spec = runner.spec(workload, config) if _installed(LIBRARY[config]) else None
                planned.append((workload, config, "", None, spec))
        for workload, config, _, _, spec in planned:
            if spec is not None:
                batches.setdefault(LIBRARY[config], []).append(spec)
        results = {}
        for specs in batches.values():
            for spec, result in zip(specs, runner.run(specs)):
                results[spec["grads"]] = result
        # a refused budget: one more row per workload at the smallest feasible budget named
        extra = []
        for workload in workloads:
            smallest = [results[s["grads"]]["smallest_feasible_bytes"]
                        for w, _, _, _, s in planned
                        if w == workload and s is not None
                        and "smallest_feasible_bytes" in results[s["grads"]]]
            if smallest:
                spec = runner.spec(workload, TIDU_BUDGET, max(smallest))
                extra.append(spec)
                planned.append((workload, TIDU_BUDGET, "smallest feasible", max(smallest),
                                spec))
        for spec, result in zip(extra, runner.run(extra)):
            results[spec["grads"]] = result
        return _rows(workloads, ref_specs, ref_results, planned, results, quick)


def _note(config: str) -> str:
    return f"{LIBRARY[config]} is not installed: skipped (pip install '.[bench]')"


def _row(workload: str, config: str, sizes: dict, result: dict, case: str) -> dict:
    row = {"workload": WORKLOAD, "case": case, "problem": workload, "config": config,
           "library": LIBRARY[config], "sizes": dict(sizes), "peers": {}}
    for key in ("ms", "first_call_s", "rss_peak_mb", "rss_peak_range_mb", "rss_method",
                "rss_default_malloc_mb", "tracemalloc_peak_mb", "xla_temp_mb", "error",
                "smallest_feasible_bytes", "note"):
        if key in result:
            row[key] = result[key]
    if row["library"] == "tidu" and "ms" in row:
        row["tidu_ms"] = row["ms"]
    return row


def _rows(workloads, ref_specs, ref_results, planned, results, quick) -> list[dict]:
    rows = []
    for workload, ref_spec, ref in zip(workloads, ref_specs, ref_results):
        sizes = SIZES[quick][workload]
        reference = _load(ref_spec["grads"])
        head = _row(workload, TIDU_JIT, sizes, ref, _case(workload, TIDU_JIT, sizes))
        head.update(grads_agree=True, grads_check="the reference")
        rows.append(head)
        for w, config, label, budget, spec in planned:
            if w != workload:
                continue
            result = {"note": _note(config)} if spec is None else results[spec["grads"]]
            row = _row(workload, config, sizes, result, _case(workload, config, sizes, label))
            if config == TIDU_BUDGET:
                row["budget_bytes"] = budget
                row["budget_mb"] = budget / 2**20
            if spec is not None and "error" not in result:
                row["grads_agree"], row["grads_check"] = _grads_check(spec["grads"], reference)
                _ratios(row, head)
            rows.append(row)
        head["peers"] = {r["case"].split(": ", 1)[1]: r["ms"] for r in rows
                         if r["problem"] == workload and r["library"] != "tidu" and "ms" in r}
    return rows


def _ratios(row: dict, head: dict) -> None:
    """The row's figures over the reference row's (no budget)."""
    row["ms_over_jit"] = row["ms"] / head["ms"]
    row["rss_over_jit"] = row["rss_peak_mb"] / head["rss_peak_mb"]
    if "tracemalloc_peak_mb" in row:
        row["tracemalloc_over_jit"] = row["tracemalloc_peak_mb"] / head["tracemalloc_peak_mb"]
    if "budget_mb" in row and "tracemalloc_peak_mb" in row:
        row["tracemalloc_over_budget"] = row["tracemalloc_peak_mb"] / row["budget_mb"]


# --- printing -----------------------------------------------------------------------------------


def _format_row(row: dict) -> list[str]:
    case = row["case"].split(": ", 1)[1]
    if "ms" not in row:
        return [f"  {case[:58]:58s} {row.get('note') or row.get('error', '')}"]
    traced = (f"{row['tracemalloc_peak_mb']:8.1f}" if "tracemalloc_peak_mb" in row
              else f"{'-':>8s}")
    default = (f"{row['rss_default_malloc_mb']:8.1f}" if "rss_default_malloc_mb" in row
               else f"{'-':>8s}")
    versus = (f"{row['rss_over_jit']:5.2f} {row['ms_over_jit']:5.2f}"
              if "ms_over_jit" in row else f"{'':11s}")
    lines = [f"  {case[:58]:58s} {traced} {row['rss_peak_mb']:8.1f} {default} "
             f"{row['ms']:9.1f} {row['first_call_s']:8.2f}  {versus}  "
             f"{row.get('grads_check', '')}"]
    if "budget_mb" in row and "tracemalloc_peak_mb" in row:
        lines.append(f"  {'':58s} budget {row['budget_mb']:.1f} MB: tracemalloc peak / budget "
                     f"{row['tracemalloc_over_budget']:.2f}")
    if "xla_temp_mb" in row:
        lines.append(f"  {'':58s} XLA's temp buffer (memory_analysis) {row['xla_temp_mb']:.1f} MB")
    return lines


def format_rows(rows: list[dict]) -> str:
    """A table per workload: peaks in MiB (tracemalloc; resident with the fixed mmap
    threshold; resident under glibc's default malloc), the step and the first call, and
    the resident peak and the step over ``jit(grad)``'s."""
    lines = []
    problem = None
    for row in rows:
        if row["problem"] != problem:
            problem = row["problem"]
            lines.append(f"{WORKLOAD}: {_describe(problem, row['sizes'])}")
            lines.append(f"  {'':58s} {'---------- peak MiB ----------':>26s} {'step ms':>9s} "
                         f"{'1st call':>8s}  {'/ jit(grad)':11s}")
            lines.append(f"  {'configuration':58s} {'tracemal':>8s} {'RSS':>8s} "
                         f"{'RSS dflt':>8s} {'':9s} {'s':>8s}  {'RSS   time':11s}  gradients")
        lines += _format_row(row)
    methods = {row["rss_method"] for row in rows if "rss_method" in row}
    lines.append("RSS: " + "; ".join(sorted(methods)) + ". RSS dflt: the same under glibc's "
                 "default malloc, in the timing process (median of "
                 f"{RSS_STEPS} steps each)")
    return "\n".join(lines)


def _short(row: dict) -> str:
    """A point's label: the configuration, briefly."""
    if row["config"] == TIDU_BUDGET:
        return "budget " + row["case"].rsplit("budget ", 1)[-1]
    return {TIDU_JIT: "tidu jit", TIDU_EAGER: "tidu eager", TIDU_BALANCED: "eager balanced",
            TIDU_EVERYTHING: "eager, keeping everything",
            TORCH: "torch",
            TORCH_CHECKPOINT: "torch checkpoint_sequential", JAX: "jax.jit",
            JAX_CHECKPOINT: "jax.checkpoint"}[row["config"]]


def plot(rows: list[dict], path: str) -> None:
    """Peak resident memory against step time, each over tidu ``jit(grad)``'s, one panel per
    workload, log scales (needs matplotlib: ``pip install matplotlib``)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    for ax, problem in zip(axes, ("mlp", "recurrence")):
        measured = [r for r in rows if r["problem"] == problem and "ms" in r
                    and r.get("rss_peak_mb", 0) > 0]      # quick sizes may be below a page
        head = next(r for r in measured if r["config"] == TIDU_JIT)
        for row in measured:
            x, y = row["ms"] / head["ms"], row["rss_peak_mb"] / head["rss_peak_mb"]
            ax.scatter(x, y, color="C0" if row["library"] == "tidu" else "C1", zorder=3)
            ax.annotate(_short(row), (x, y), fontsize=7, xytext=(4, 3),
                        textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis, values in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            axis.set_major_formatter(FormatStrFormatter("%g"))
            # label the minor ticks too where the range is under a decade
            axis.set_minor_formatter(FormatStrFormatter("%g" if values[1] < 10 * values[0]
                                                        else ""))
        ax.set_xlabel("step time / tidu jit(grad)  (tidu blue, peers orange)")
        ax.set_ylabel("peak resident memory / tidu jit(grad)")
        ax.set_title(head["case"].split(": ", 1)[0], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory_budget",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--json", default=None, help="write the rows here as JSON")
    parser.add_argument("--plot", default=None,
                        help="draw peak memory against time here (an .svg; needs matplotlib)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child()
        return []
    benchmarks.hold_threads()
    start = time.perf_counter()
    rows = memory_budget_workload(args.quick)
    print(f"threads: {benchmarks.format_thread_settings(benchmarks.thread_settings())}")
    print(format_rows(rows))
    print(f"seconds: {time.perf_counter() - start:.1f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)
    if args.plot:
        plot(rows, args.plot)
    return rows


if __name__ == "__main__":
    main()
