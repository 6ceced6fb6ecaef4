"""Django's PostgreSQL backend with bulk inserts as ``VALUES`` rows (see :mod:`.compiler`)."""
