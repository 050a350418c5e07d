// The prompts of veomni-generate: a JSONL file (or stdin), one prompt per non-blank line, either a conversation
// {"messages": [...]} for the chat template or ready token ids {"input_ids": [...]}.
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace veomni {

struct PromptRecord {
  std::string location;              // "<file>:<line>", for messages
  std::vector<int64_t> input_ids;    // set for an input_ids record
  nlohmann::ordered_json messages;   // set (an array) for a conversation record
  std::string media_dir;  // where relative media paths of its parts resolve: the prompt file's directory
  bool is_conversation() const { return messages.is_array(); }
  // A conversation with an image, video or audio part ({"type": "image", "image": PATH}, ...).
  bool has_media() const;
};

// Reads every record; InputError naming file:line for a line that is not JSON, not an object, has neither or both
// of the keys, or has input_ids that are not a non-empty list of integers or messages that are not a non-empty list.
std::vector<PromptRecord> read_prompt_records(std::istream& in, const std::string& source);
// "-" reads stdin (media paths then resolve against the working directory, as veomni-preprocess's do); InputError
// when the file cannot be opened.
std::vector<PromptRecord> read_prompt_file(const std::string& path);

// InputError naming the record for an id outside [0, vocab) or a prompt longer than max_positions.
void check_prompt_ids(const std::vector<int64_t>& ids, int64_t vocab, int64_t max_positions,
                      const std::string& location);

}  // namespace veomni
