"""The Keras training engine: one compiled program per architecture, one epoch loop.

Imports no searcher. Importing it has no side effects: XLA's options are requested when a
`Trainer` is made (`xla_fusion.request_multi_output_fusion`).
"""
