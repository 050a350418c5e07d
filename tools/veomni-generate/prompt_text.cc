// PromptText over the tokenizer library (ChatML built in, a model's Jinja template through the node worker), or,
// in a build without that library, a stand-in that accepts token-id prompts only.
#include "prompt_text.h"

#include <filesystem>

#include "core/error.h"

#ifdef VEOMNI_HAVE_TOKENIZER
#include "data/chat_template.h"
#include "data/chat_template_conversation.h"
#include "data/chat_template_source.h"
#include "data/chat_template_worker.h"
#include "data/tokenizer.h"
#endif

namespace veomni {

#ifdef VEOMNI_HAVE_TOKENIZER

struct PromptText::Impl {
  Tokenizer tokenizer;
  std::string chat_template;
  std::string tokenizer_dir;
  std::unique_ptr<ChatTemplateWorker> worker;  // started on the first conversation under a model template

  std::string render_chatml(const nlohmann::ordered_json& messages, const std::string& location) const {
    std::vector<ChatMessage> chat;
    for (const auto& m : messages) {
      VEOMNI_INPUT_CHECK(m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content") &&
                             m["content"].is_string(),
                         "{}: a ChatML message needs a string \"role\" and a string \"content\", got {}", location,
                         m.dump());
      const std::string role = m["role"].get<std::string>();
      VEOMNI_INPUT_CHECK(is_chat_role(role), "{}: role \"{}\" is not one of system, user, assistant, tool", location,
                         role);
      chat.push_back({role, m["content"].get<std::string>()});
    }
    return ChatTemplate::render(chat) + "<|im_start|>assistant\n";
  }

  std::string render_model(const nlohmann::ordered_json& messages, const std::string& location) {
    if (!worker) {
      const ChatTemplateSource source = load_chat_template(chat_template, tokenizer_dir + "/tokenizer.json");
      worker = std::make_unique<ChatTemplateWorker>(default_chat_template_worker_paths(), source.text, source.globals);
    }
    const Conversation conversation =
        conversation_from_record(nlohmann::ordered_json{{"messages", messages}}, std::nullopt, {});
    // One rendering of all the messages with the generation prompt.
    const nlohmann::ordered_json renders = nlohmann::ordered_json::array({{conversation.messages.size(), true}});
    const nlohmann::ordered_json request_item = {{"messages", conversation.messages},
                                                 {"tools", conversation.tools},
                                                 {"kwargs", conversation.kwargs},
                                                 {"renders", renders}};
    nlohmann::ordered_json request = {{"conversations", nlohmann::ordered_json::array({request_item})}};
    const nlohmann::ordered_json reply = worker->exchange(request, location);
    VEOMNI_CHECK(reply.contains("results") && reply["results"].size() == 1, "the chat template worker answered {}",
                 reply.dump().substr(0, 200));
    const nlohmann::ordered_json& result = reply["results"][0];
    VEOMNI_INPUT_CHECK(!result.contains("error"), "{}: the chat template failed: {}", location,
                       result.contains("error") ? result["error"].dump() : "");
    return result["texts"][0].get<std::string>();
  }
};

PromptText::PromptText(const std::string& tokenizer_dir, const std::string& chat_template)
    : tokenizer_dir_(tokenizer_dir) {
  const std::string path = tokenizer_dir + "/tokenizer.json";
  if (tokenizer_dir.empty() || !std::filesystem::exists(path)) return;
  impl_ = std::make_unique<Impl>(Impl{Tokenizer::from_file(path), chat_template, tokenizer_dir, nullptr});
}

std::vector<int64_t> PromptText::encode_conversation(const nlohmann::ordered_json& messages,
                                                     const std::string& location) {
  VEOMNI_INPUT_CHECK(impl_ != nullptr,
                     "{}: a \"messages\" prompt needs the model's tokenizer, and {} has no tokenizer.json (hint: give "
                     "{{\"input_ids\": [...]}} prompts, or copy the tokenizer files into the model directory)",
                     location, tokenizer_dir_);
  const std::string text = impl_->chat_template == "chatml" ? impl_->render_chatml(messages, location)
                                                            : impl_->render_model(messages, location);
  const std::vector<int32_t> ids = impl_->tokenizer.encode(text);
  return {ids.begin(), ids.end()};
}

std::string PromptText::decode(const std::vector<int64_t>& ids) const {
  VEOMNI_CHECK(impl_ != nullptr, "decoding without a tokenizer");
  const std::vector<int32_t> narrow(ids.begin(), ids.end());
  return impl_->tokenizer.decode(narrow, true);
}

#else

struct PromptText::Impl {};

PromptText::PromptText(const std::string& tokenizer_dir, const std::string& /*chat_template*/)
    : tokenizer_dir_(tokenizer_dir) {}

std::vector<int64_t> PromptText::encode_conversation(const nlohmann::ordered_json& /*messages*/,
                                                     const std::string& location) {
  throw InputError(fmt::format("{}: a \"messages\" prompt needs the tokenizer, which this build does not have (it "
                               "needs PCRE2 and utf8proc; hint: give {{\"input_ids\": [...]}} prompts)",
                               location));
}

std::string PromptText::decode(const std::vector<int64_t>& /*ids*/) const {
  VEOMNI_CHECK(false, "decoding without a tokenizer");
  return {};
}

#endif

PromptText::~PromptText() = default;

bool PromptText::has_tokenizer() const { return impl_ != nullptr; }

}  // namespace veomni
