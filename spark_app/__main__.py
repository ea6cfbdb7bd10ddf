"""`python -m spark_app ...`: the same job as `spark-submit spark_app/main.py ...`."""

from spark_app.main import main

raise SystemExit(main())
