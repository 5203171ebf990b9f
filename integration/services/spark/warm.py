"""Starts and stops one local Spark session with Delta so that Ivy resolves
the delta-spark jars into $FLIGHTLINE_SPARK_IVY once, at `services.sh up`."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ["ROOT"], "integration", "python"))
from spark_session import spark_session  # noqa: E402

spark = spark_session()
print("spark", spark.version, "ready", file=sys.stderr)
spark.stop()
