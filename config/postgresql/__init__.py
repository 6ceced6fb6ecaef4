"""Django's PostgreSQL backend with bulk inserts as ``VALUES`` rows (see :mod:`.compiler`), and
the migrations' helper that drops Django's ``varchar_pattern_ops`` index twins (:mod:`.indexes`).
"""
