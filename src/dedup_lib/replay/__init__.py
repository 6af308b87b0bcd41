"""The replay on Spark: the rules in Spark SQL, then one pass per key in a JVM or Python kernel."""
