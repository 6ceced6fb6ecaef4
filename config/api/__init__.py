"""The small API kit every app uses: coded errors, the error envelope, cursor pages, prefixed ids,
query validation and schema helpers. It imports no Pigeonhole app."""
