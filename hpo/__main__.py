import os
import sys

# TensorFlow's C++ start-up chatter is noise for a CLI user; set before TF is imported.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from hpo.cli import main  # noqa: E402

sys.exit(main())
