"""Reports: a benchmark's tables, plots and tree viewer, and a single run's viewer and plot.

``writer`` is the entry point (``write_bench_report``, ``write_run_report``, ``run_report_html``);
``tables`` makes report.json and report.md, ``plots`` the PNGs, ``html`` and ``viewer_data`` the
self-contained report.html (``viewer.html`` is its page).
"""
