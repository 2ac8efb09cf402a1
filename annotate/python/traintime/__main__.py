"""python -m traintime: the `traintime` command (run, doctor, report)."""
import sys

from traintime._cli import main

sys.exit(main())
