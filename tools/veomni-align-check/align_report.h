// Renders an alignment report as a text table or as JSON.
#pragma once
#include <string>

#include "align_compare.h"

namespace veomni {

// A header line, one row per (key, run) with the worst step (1-based), then "aligned" or "NOT aligned".
std::string format_report_table(const AlignReport& report);
// The same content as one JSON object (rel_diff is null where it is infinite).
std::string format_report_json(const AlignReport& report);

}  // namespace veomni
