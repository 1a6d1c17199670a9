"""The outputs of `history`: table.py (text rows and the console lines), outputs.py (summary.md and
JUnit XML), plots.py (one plot per series), page.py (history.html with its PNGs, and the command
that reproduces it).
"""
