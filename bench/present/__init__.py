"""Layer 5, everything a person reads: console.py (a point's summary, the sweep's table), progress.py
(the sweep's progress bar), sweep.py (the sweep's other lines and its report), plan.py (the planner's
tables), plan_json.py (a plan's JSON text), preflight.py (the preflight table), calibrate.py (calibrate's lines and cluster file),
style.py (the figures' one style), boxes.py (box plots drawn as a few lines), fonts.py (fonts read into memory once for the figures a
process draws), text_layout.py (each text laid out once per renderer), text_glyphs.py (each text's glyphs
rasterized and measured once per font, size and dpi), tick_copies.py (an axis' new ticks copied from
a pattern), marker_styles.py (each named marker style built once), legend_packing.py (a
legend's boxes packed once per draw), matplotlib_patches.py (where these replace matplotlib's own), png.py (the figures' PNG encoder). Packages: report/ (the report), check/ (check's and ab's
outputs), history/ (the history page, table and plots).
"""
