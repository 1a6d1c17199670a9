"""The outputs of `history`: table.py (text rows and the console lines), outputs.py (summary.md and
JUnit XML), plots.py (one plot per series), inputs.py (what history.html shows, as plain data),
page.py (history.html with its PNGs written, and the command that reproduces it), draw.py (the
figures drawn, in a worker pool where there are enough, and the page rendered from those inputs).
"""
