//! The JSON-lines record schema, defined in `wirelat-records` (the crate both the collector that
//! writes the records and this scorer that reads them depend on); re-exported here.

pub use wirelat_records::*;
