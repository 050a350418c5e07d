// The node process that renders a model's Jinja chat template (chat_template_worker.mjs): started once, fed JSON
// lines over pipes, never left hanging.
#pragma once
#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

namespace veomni {

// Where the worker's pieces are: each from its environment variable, else beside the executable
// (<bin>/../share/veomni/...), else the build's default (the source tree's copy and .cache/node_modules).
struct ChatTemplateWorkerPaths {
  std::string node;          // VEOMNI_NODE, else "node" on PATH
  std::string script;        // VEOMNI_CHAT_TEMPLATE_WORKER
  std::string node_modules;  // VEOMNI_NODE_MODULES: the folder holding @huggingface/jinja
};
ChatTemplateWorkerPaths default_chat_template_worker_paths();

class ChatTemplateWorker {
 public:
  // Starts node on the worker script (fork and exec, no shell) and loads `template_text` with `globals` (bos_token,
  // eos_token, ...). InputError with a hint when node cannot be run, @huggingface/jinja cannot be loaded or the
  // template does not parse.
  ChatTemplateWorker(const ChatTemplateWorkerPaths& paths, const std::string& template_text,
                     const nlohmann::ordered_json& globals);
  ~ChatTemplateWorker();
  ChatTemplateWorker(const ChatTemplateWorker&) = delete;
  ChatTemplateWorker& operator=(const ChatTemplateWorker&) = delete;

  // Sends one request line and returns the answer line, parsed. InputError naming `what` (the records in flight)
  // when the worker dies or answers something that is not JSON.
  nlohmann::ordered_json exchange(const nlohmann::ordered_json& request, const std::string& what);

  // Whether the template marks assistant text with {% generation %} blocks.
  bool has_generation_blocks() const { return generation_blocks_; }

 private:
  void write_all(const std::string& bytes, const std::string& what);
  std::string read_line(const std::string& what);
  [[noreturn]] void fail(const std::string& what, const std::string& reason);
  void stop();

  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  int errors_from_child_ = -1;
  std::string pending_;  // bytes read past the last answer line
  std::string stderr_tail_;
  bool generation_blocks_ = false;
};

}  // namespace veomni
