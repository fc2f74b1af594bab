import sys

from . import console

sys.exit(console())
