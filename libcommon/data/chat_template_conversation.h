// A conversation record as the model's chat template receives it: OpenAI "messages" (content a string or a list of
// text / image / video / audio parts, tool calls, tool results) or ShareGPT "conversations" turned into them.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace veomni {

struct Conversation {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI messages, keys in input order
  nlohmann::ordered_json tools;                                       // the record's tool list; null without one
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();   // template variables (enable_thinking, ...)
  std::vector<size_t> assistant;                                      // indices of the assistant messages
};

// Whether the record is a conversation ("messages" or "conversations").
bool is_conversation_record(const nlohmann::ordered_json& record);

// The conversation of a record. "messages": objects with a role (system, user, assistant, tool) and a content that
// is a string or a list of parts (objects with a "type"); an assistant message may carry "tool_calls" (a list) and
// "reasoning_content" instead of or besides its content (null or missing content then reads as ""). ShareGPT
// "conversations": {"from", "value"} turns, human -> user, gpt -> assistant, system -> system, observation -> tool,
// function_call -> an assistant message whose tool_calls are the value's JSON ({"name", "arguments"} or a list
// of them); a record-level "system" string comes first. "tools": a list, or a JSON string holding one.
// "chat_template_kwargs": an object merged over `kwargs`. `system_prompt` is prepended when the conversation does
// not start with a system message. InputError naming the message otherwise.
Conversation conversation_from_record(const nlohmann::ordered_json& record,
                                      const std::optional<std::string>& system_prompt,
                                      const nlohmann::ordered_json& kwargs);

}  // namespace veomni
