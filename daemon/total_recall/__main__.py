from total_recall.cli import main

raise SystemExit(main())
