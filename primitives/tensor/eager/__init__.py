"""(room described in docs/architecture.md)"""
