from gpen_watch.cli import main

raise SystemExit(main())
