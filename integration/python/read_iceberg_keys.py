"""Independent reader for the Iceberg sink's kill test: prints the COLUMN
of every row of an Iceberg table, read with pyiceberg's SqlCatalog over the
sink's SQLite catalog, one value per line (binary values decoded as UTF-8).
A missing table prints nothing.

usage: read_iceberg_keys.py CATALOG_DB WAREHOUSE TABLE COLUMN
"""
import os
import sys

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

db, warehouse, ident, column = sys.argv[1:5]
out = sys.stdout
try:
    t = SqlCatalog("flightline", uri="sqlite:///" + db, warehouse=warehouse).load_table(ident)
except NoSuchTableError:
    t = None
if t is not None and t.current_snapshot() is not None and len(t.schema().fields) > 0:
    for v in t.scan(selected_fields=(column,)).to_arrow().column(column).to_pylist():
        if isinstance(v, (bytes, bytearray)):
            v = v.decode()
        out.write(f"{v}\n")
out.flush()
os._exit(0)
