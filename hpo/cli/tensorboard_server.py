"""TensorBoard's server as `hpo tensorboard` runs it: `python -m hpo.cli.tensorboard_server
[tensorboard's arguments]`.

It is TensorBoard's own program (`tensorboard.program.TensorBoard` with the default plugins),
started without importing TensorFlow: TensorBoard then reads event files through its own
pure-Python file layer, as it does where TensorFlow is not installed. A study's logs are local
files, which that layer reads in full (the HParams dashboard, scalars, histograms, images and
text are served the same), and the server starts in about 2 CPU-seconds instead of the 8
it takes with TensorFlow imported, with none of TensorFlow's start-up lines.
(`tensorboard --logdir`, the line `hpo search` prints, imports TensorFlow as usual.)
"""

from __future__ import annotations

import sys
import types

# TensorBoard's `tensorboard.compat.tf()` takes its stub API whenever this module imports;
# its no-TensorFlow builds ship it as a file, here it is put in place before TensorBoard loads.
NO_TENSORFLOW_MARKER = "tensorboard.compat.notf"


def main() -> None:
    sys.modules.setdefault(NO_TENSORFLOW_MARKER, types.ModuleType(NO_TENSORFLOW_MARKER))
    import absl.logging
    from absl import app
    from tensorboard import default, program

    # What `tensorboard.main` sets up, less its "TensorFlow installation not found" notice,
    # which would tell a user with TensorFlow installed something untrue.
    absl.logging.set_verbosity(absl.logging.WARNING)
    board = program.TensorBoard(plugins=default.get_plugins())
    app.run(board.main, flags_parser=board.configure)


if __name__ == "__main__":
    main()
