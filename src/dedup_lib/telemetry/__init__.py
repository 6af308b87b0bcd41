"""Telemetry in and out: the canonical schema, the readers, the writer, the shipped samples.

- :mod:`~dedup_lib.telemetry.schema`: the canonical columns, the names the Azure SDKs give
  them, the file formats known.
- :mod:`~dedup_lib.telemetry.loader`: ``load_telemetry``, which gives a
  :mod:`~dedup_lib.telemetry.loaded` result: the valid rows, the quarantine and the counts.
- :mod:`~dedup_lib.telemetry.files`: which files a path means; :mod:`~dedup_lib.telemetry.sources`:
  those files as Spark reads them; :mod:`~dedup_lib.telemetry.recognise`: which structured
  format a file is; :mod:`~dedup_lib.telemetry.formats`: the structured formats' readers.
- :mod:`~dedup_lib.telemetry.renaming`: source columns onto the canonical names.
- :mod:`~dedup_lib.telemetry.times`: times as telemetry writes them, parsed.
- :mod:`~dedup_lib.telemetry.quarantine`: why a row cannot take part in the replay.
- :mod:`~dedup_lib.telemetry.tally`: every record counted by file and fate, checked to add up.
- :mod:`~dedup_lib.telemetry.landing`: a folder where files land, read a micro-batch at a time
  (the live monitor's).
- :mod:`~dedup_lib.telemetry.write`: ``write_telemetry``, under the names a source uses.
- :mod:`~dedup_lib.telemetry.samples`: the sample telemetry shipped with the package.

The recorder that applications wrap their Service Bus senders with is
:mod:`dedup_lib.recorder`, below every layer.
"""
