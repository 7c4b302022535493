-- Version 4: the lake's type folders became Hive partitions (`event_type=<type>/date=<day>/`,
-- api/eventlog/layout.py). A ledger path is the file's path in that layout wherever the file
-- is found, so the files loaded before keep their entries when the pipeline moves them.

UPDATE loaded_files SET path = 'event_type=' || path WHERE path NOT LIKE 'event_type=%';
