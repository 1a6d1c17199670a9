"""The report: tidy frames (bench.analysis.report) -> PNG plots -> one self-contained HTML page, plus
summary.md and results.csv. `bench.present.report.build.build_report` is the entry point."""
