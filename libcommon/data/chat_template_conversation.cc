// Validating OpenAI messages and converting ShareGPT turns, for the model's chat template.
#include "data/chat_template_conversation.h"

#include "core/error.h"
#include "data/chat_template.h"

namespace veomni {

namespace {

using ojson = nlohmann::ordered_json;

void check_content(const ojson& message, size_t k) {
  const ojson& content = message["content"];
  if (content.is_string()) return;
  VEOMNI_INPUT_CHECK(content.is_array(), "message {}: \"content\" is {}, expected a string or a list of parts", k,
                     content.type_name());
  for (size_t p = 0; p < content.size(); ++p) {
    const ojson& part = content[p];
    VEOMNI_INPUT_CHECK(part.is_object() && part.contains("type") && part["type"].is_string(),
                       "message {}, content part {}: expected an object with a \"type\" (text, image, video, audio)",
                       k, p);
    if (part["type"] == "text")
      VEOMNI_INPUT_CHECK(part.contains("text") && part["text"].is_string(),
                         "message {}, content part {}: a text part needs a \"text\" string", k, p);
  }
}

void check_tool_calls(const ojson& message, size_t k) {
  const ojson& calls = message["tool_calls"];
  VEOMNI_INPUT_CHECK(calls.is_array(), "message {}: \"tool_calls\" is {}, expected a list", k, calls.type_name());
  for (size_t c = 0; c < calls.size(); ++c) {
    const ojson& call = calls[c];
    const ojson* function = call.is_object() && call.contains("function") ? &call["function"] : &call;
    VEOMNI_INPUT_CHECK(function->is_object() && function->contains("name") && (*function)["name"].is_string(),
                       "message {}, tool call {}: expected {{\"function\": {{\"name\": ..., \"arguments\": ...}}}}",
                       k, c);
  }
}

ojson checked_message(ojson m, size_t k) {
  VEOMNI_INPUT_CHECK(m.is_object(), "message {} is {}, expected an object", k, m.type_name());
  VEOMNI_INPUT_CHECK(m.contains("role") && m["role"].is_string(), "message {} has no \"role\" string", k);
  const std::string role = m["role"].get<std::string>();
  VEOMNI_INPUT_CHECK(is_chat_role(role), "message {}: unknown role '{}' (expected system, user, assistant or tool)",
                     k, role);
  const bool assistant = role == "assistant";
  const bool has_calls = assistant && m.contains("tool_calls") && !m["tool_calls"].is_null();
  if (has_calls) check_tool_calls(m, k);
  const bool empty = !m.contains("content") || m["content"].is_null();
  // An assistant turn that only calls tools or only reasons has no text: templates read "" there.
  if (empty && assistant && (has_calls || m.contains("reasoning_content"))) m["content"] = "";
  VEOMNI_INPUT_CHECK(m.contains("content") && !m["content"].is_null(), "message {} has no \"content\"", k);
  check_content(m, k);
  return m;
}

ojson tool_calls_from_sharegpt(const std::string& value, size_t k) {
  const ojson parsed = ojson::parse(value, nullptr, false);
  VEOMNI_INPUT_CHECK(!parsed.is_discarded() && (parsed.is_object() || parsed.is_array()),
                     "turn {}: a function_call value must be JSON: {{\"name\": ..., \"arguments\": ...}} or a list",
                     k);
  ojson calls = ojson::array();
  for (const ojson& call : parsed.is_array() ? parsed : ojson::array({parsed})) {
    VEOMNI_INPUT_CHECK(call.is_object() && call.contains("name"), "turn {}: a function call without \"name\"", k);
    calls.push_back({{"type", "function"},
                     {"function", {{"name", call["name"]}, {"arguments", call.value("arguments", ojson::object())}}}});
  }
  return calls;
}

ojson messages_from_sharegpt(const ojson& turns, const ojson& record) {
  VEOMNI_INPUT_CHECK(turns.is_array(), "\"conversations\" is {}, expected an array", turns.type_name());
  ojson messages = ojson::array();
  if (record.contains("system")) {
    VEOMNI_INPUT_CHECK(record["system"].is_string(), "\"system\" is {}, expected a string",
                       record["system"].type_name());
    messages.push_back({{"role", "system"}, {"content", record["system"]}});
  }
  for (size_t k = 0; k < turns.size(); ++k) {
    const ojson& turn = turns[k];
    VEOMNI_INPUT_CHECK(turn.is_object() && turn.contains("from") && turn["from"].is_string() &&
                           turn.contains("value") && turn["value"].is_string(),
                       "turn {}: expected {{\"from\": ..., \"value\": \"...\"}}", k);
    const std::string from = turn["from"].get<std::string>();
    const ojson& value = turn["value"];
    if (from == "human" || from == "user")
      messages.push_back({{"role", "user"}, {"content", value}});
    else if (from == "gpt" || from == "assistant")
      messages.push_back({{"role", "assistant"}, {"content", value}});
    else if (from == "system")
      messages.push_back({{"role", "system"}, {"content", value}});
    else if (from == "observation" || from == "tool")
      messages.push_back({{"role", "tool"}, {"content", value}});
    else if (from == "function_call")
      messages.push_back(
          {{"role", "assistant"}, {"content", ""}, {"tool_calls", tool_calls_from_sharegpt(value.get<std::string>(), k)}});
    else
      throw InputError(fmt::format(
          "turn {}: unknown \"from\" '{}' (expected human, gpt, system, function_call or observation)", k, from));
  }
  return messages;
}

ojson tools_of(const ojson& record) {
  if (!record.contains("tools") || record["tools"].is_null()) return nullptr;
  ojson tools = record["tools"];
  if (tools.is_string()) {
    const std::string text = tools.get<std::string>();
    if (text.empty()) return nullptr;
    tools = ojson::parse(text, nullptr, false);
    VEOMNI_INPUT_CHECK(!tools.is_discarded(), "\"tools\" is a string that does not hold JSON");
  }
  VEOMNI_INPUT_CHECK(tools.is_array(), "\"tools\" is {}, expected a list of tool schemas", tools.type_name());
  return tools.empty() ? ojson(nullptr) : tools;
}

}  // namespace

bool is_conversation_record(const ojson& record) {
  return record.is_object() && (record.contains("messages") || record.contains("conversations"));
}

Conversation conversation_from_record(const ojson& record, const std::optional<std::string>& system_prompt,
                                      const ojson& kwargs) {
  VEOMNI_INPUT_CHECK(is_conversation_record(record), "the record has neither \"messages\" nor \"conversations\"");
  Conversation c;
  const bool sharegpt = !record.contains("messages");
  const ojson raw = sharegpt ? messages_from_sharegpt(record["conversations"], record) : record["messages"];
  const char* key = sharegpt ? "conversations" : "messages";
  VEOMNI_INPUT_CHECK(raw.is_array(), "\"{}\" is {}, expected an array", key, raw.type_name());
  VEOMNI_INPUT_CHECK(!raw.empty(), "\"{}\" is empty", key);
  for (size_t k = 0; k < raw.size(); ++k) c.messages.push_back(checked_message(raw[k], k));
  if (system_prompt && c.messages.front()["role"] != "system")
    c.messages.insert(c.messages.begin(), ojson{{"role", "system"}, {"content", *system_prompt}});
  for (size_t k = 0; k < c.messages.size(); ++k)
    if (c.messages[k]["role"] == "assistant") c.assistant.push_back(k);
  c.tools = tools_of(record);
  c.kwargs = kwargs.is_object() ? kwargs : ojson::object();
  if (record.contains("chat_template_kwargs")) {
    VEOMNI_INPUT_CHECK(record["chat_template_kwargs"].is_object(), "\"chat_template_kwargs\" is {}, expected an object",
                       record["chat_template_kwargs"].type_name());
    for (const auto& [name, value] : record["chat_template_kwargs"].items()) c.kwargs[name] = value;
  }
  return c;
}

}  // namespace veomni
