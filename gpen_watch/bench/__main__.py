import sys

from gpen_watch.bench.cli import main

sys.exit(main())
