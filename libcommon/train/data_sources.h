// data.datasets: several training datasets mixed by weight, each entry {path, weight, name} (a bare path means
// weight 1 and the file's stem as its name). Parsed and checked here; read by train/train_sources.h.
#pragma once
#include <string>
#include <vector>

namespace veomni {

struct DataSourceSpec {
  std::string path;    // a dataset as data.train_path takes it (a file, a shard set, a directory)
  double weight = 1.0; // >= 0; a slot of the global batch draws this source with probability weight / sum
  std::string name;    // names the metrics (loss_<name>); letters, digits and '_' only
  bool operator==(const DataSourceSpec&) const = default;
};

// Entries as the config holds them (YAML flow mappings "{path: a.h5, weight: 2, name: math}" or bare paths).
// InputError naming data.datasets[i] and the key for an unknown key, a missing path, a weight that is negative or
// not a number, a bad or repeated name, or weights that sum to 0.
std::vector<DataSourceSpec> parse_data_sources(const std::vector<std::string>& entries);

// VeOmni's multisource file, named by data.train_path (a .yaml or .yml file): `sources:` (dataset paths, relative to
// the current directory as data.train_path is), `names:` (optional) and `schedule:` with one entry of schedule_type
// const whose `weights:` give the mix (optional: all 1). InputError naming the file and the key otherwise (several
// schedule phases are refused: data.datasets has one mix per run).
bool is_multisource_file(const std::string& path);
std::vector<DataSourceSpec> read_multisource_file(const std::string& path);

// The config text of a source ("{path: a.h5, weight: 2, name: math}").
std::string data_source_text(const DataSourceSpec& source);

}  // namespace veomni
