"""The outputs of `check` and `ab`: outcome.py (what `check` prints and writes), table.py (the check's
table as text rows), junit.py (JUnit XML), summary.py (markdown summary), ab.py (ab's table and ab.json).
"""
