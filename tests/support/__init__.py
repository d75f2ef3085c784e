"""What the tests share: the CLI helpers (`cli`), fault injection (`faults`), the bad-input
catalogue (`bad_inputs`), and the modules that experiments written by tests name as
`tests.support.MODULE:function` (loaders, builders, callbacks, stand-in workers)."""
