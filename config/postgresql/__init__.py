"""PostgreSQL helpers for migrations: dropping Django's ``varchar_pattern_ops`` index twins
(:mod:`.indexes`) and LZ4 compression of large columns (:mod:`.compression`)."""
