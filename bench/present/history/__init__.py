"""The outputs of `history`: table.py (text rows and the console lines), outputs.py (summary.md and
JUnit XML), plots.py (one plot per series), page.py (history.html with its PNGs as plain inputs, the
files written, and the command that reproduces it), draw.py (the figures drawn and the page rendered
from those inputs), drawing.py (the process, started with the command, that runs draw.py meanwhile).
"""
