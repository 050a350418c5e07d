// log_dict.json's append-only companion, log_dict.steps.jsonl: the steps logged since the last full rewrite of the
// log, one JSON line each, so that a training step costs one short append instead of rewriting (and fsyncing) the
// whole log. load_metrics folds the journal back in; MetricsLogFile writes both.
#pragma once
#include <string>

#include "train/metrics_log.h"

namespace veomni {

// <dir>/log_dict.steps.jsonl beside <dir>/log_dict.json.
std::string metrics_journal_path(const std::string& log_path);

// A run's log_dict.json and its journal.
class MetricsLogFile {
 public:
  explicit MetricsLogFile(std::string log_path);

  // Appends the log's last step to the journal: one line, flushed, not fsynced (a crash of the process loses no
  // step; one of the machine at most the steps since the last write()).
  void append_last_step(const MetricsLog& log) const;
  // Rewrites the whole log atomically, then removes the journal (its steps are in the log now).
  void write(const MetricsLog& log) const;
  // Starts a run: a resumed one rewrites its log (the checkpoint's steps, maybe fewer than the files hold) and a fresh
  // one keeps the old file until its first write(). The journal is removed first, so that a crash in between never
  // folds steps of an earlier run into this one.
  void restart(const MetricsLog& log, bool resumed) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string journal_;
};

// Appends the journal's steps that follow the log's last step (a line at or before it was folded already: the rewrite
// happened, the journal's removal did not). A line that is not a step of the log (other keys, a gap in the steps, not
// a finite number) is an InputError naming the journal and the line; a last line cut short (the process died while
// writing it) is left out.
void fold_metrics_journal(MetricsLog& log, const std::string& log_path);

}  // namespace veomni
