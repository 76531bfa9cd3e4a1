"""Records: the run folder's layout and files (results), the record schema (record) and the ranks' status
files (failures). Everything that reads or writes a run folder asks these modules where things are."""
