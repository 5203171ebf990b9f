"""Drives one Spark session (Apache Spark + delta-spark) for the Delta
interop test, so that the JVM starts once for every table.

Reads one JSON command per line on stdin and answers each with one line
"@@ <json>" on stdout (anything else on stdout is Spark's, to ignore):

  {"op": "count", "path": P, "id": COL[, "version": V]}
      -> {"rows", "distinct", "min", "max"} of COL (time travel with V)
  {"op": "sql", "sql": S}        -> {"rows": [row dicts, values as str]}
  {"op": "detail", "path": P}    -> DESCRIBE DETAIL (protocol, features)
  {"op": "history", "path": P}   -> [{"version", "operation", "metrics"}]
  {"op": "stream", "path": P, "out": O, "checkpoint": C, "id": COL[,
   "startingVersion": V]}
      -> {"batches", "inputRows", "out": count of COL in O}: one
         spark.readStream of the Delta table P, trigger(availableNow=True),
         appended to the Delta table O with checkpointLocation C (the same
         C resumes where the last stream stopped); "batches" counts the
         micro-batches that read rows, "inputRows" sums them. The reader
         keeps Spark's defaults (no ignoreChanges, no skipChangeCommits):
         a commit that rewrites data with dataChange=true fails the stream.
  {"op": "quit"}

A failing command answers {"error": "..."}; the session goes on.
It prints "@@ {"ready": version}" once the session is up.
"""
import json
import sys
import traceback

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from spark_session import spark_session  # noqa: E402

out = sys.stdout


def answer(obj):
    out.write("@@ " + json.dumps(obj, default=str) + "\n")
    out.flush()


def table(path):
    return "delta.`" + path.replace("`", "``") + "`"


def count(df, c):
    row = df.selectExpr("count(*) AS n", f"count(DISTINCT `{c}`) AS d", f"min(`{c}`) AS lo", f"max(`{c}`) AS hi").first()
    return {"rows": row["n"], "distinct": row["d"], "min": row["lo"], "max": row["hi"]}


def stream(spark, cmd):
    r = spark.readStream.format("delta")
    if cmd.get("startingVersion") is not None:
        r = r.option("startingVersion", cmd["startingVersion"])
    q = (
        r.load(cmd["path"])
        .writeStream.format("delta")
        .option("checkpointLocation", cmd["checkpoint"])
        .trigger(availableNow=True)
        .start(cmd["out"])
    )
    q.awaitTermination()  # raises the stream's error
    rows = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]
    written = count(spark.read.format("delta").load(cmd["out"]), cmd["id"])
    return {"batches": len(rows), "inputRows": sum(rows), "out": written}


def run(spark, cmd):
    op = cmd["op"]
    if op == "count":
        r = spark.read.format("delta")
        if cmd.get("version") is not None:
            r = r.option("versionAsOf", cmd["version"])
        return count(r.load(cmd["path"]), cmd["id"])
    if op == "stream":
        return stream(spark, cmd)
    if op == "sql":
        return {"rows": [r.asDict(recursive=True) for r in spark.sql(cmd["sql"]).collect()]}
    if op == "detail":
        r = spark.sql("DESCRIBE DETAIL " + table(cmd["path"])).first().asDict(recursive=True)
        return {k: r.get(k) for k in ("minReaderVersion", "minWriterVersion", "tableFeatures", "numFiles", "properties")}
    if op == "history":
        rows = spark.sql("DESCRIBE HISTORY " + table(cmd["path"])).select("version", "operation", "operationMetrics").collect()
        return [{"version": r["version"], "operation": r["operation"], "metrics": r["operationMetrics"]} for r in rows]
    raise ValueError("unknown op " + op)


def main():
    spark = spark_session()
    answer({"ready": spark.version})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        try:
            answer(run(spark, cmd))
        except Exception as e:  # the Go test reports it
            answer({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-4000:]})
    spark.stop()


main()
