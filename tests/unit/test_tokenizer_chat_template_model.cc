// The model's own chat template: conversation parsing (OpenAI, ShareGPT, tools), assistant spans from prefix
// renderings and {% generation %} blocks, the node worker and its errors, Qwen3's and Qwen3-VL's templates against
// hand-derived renderings, and transformers' renderings when their fixture files exist.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/chat_template_conversation.h"
#include "data/chat_template_model.h"
#include "data/chat_template_source.h"
#include "data/chat_template_worker.h"
#include "test_tokenizer_util.h"

namespace veomni {
namespace {

using ojson = nlohmann::ordered_json;
using veomni::testing::kQwen3TokenizerPath;
using veomni::testing::qwen3_tokenizer;

const std::string kModelTemplates = std::string(VEOMNI_FIXTURES_DIR) + "/chat_templates";

ojson parse(const std::string& text) { return ojson::parse(text); }

std::unique_ptr<ChatTemplateWorker> start_worker(const std::string& spec) {
  const ChatTemplateSource source = load_chat_template(spec, kQwen3TokenizerPath);
  return std::make_unique<ChatTemplateWorker>(default_chat_template_worker_paths(), source.text, source.globals);
}

struct Rendered {
  std::string text;
  LabeledTokens tokens;
};

// The conversation through the worker and the labelling, as veomni-preprocess does it.
Rendered render(ChatTemplateWorker& worker, const Conversation& c) {
  const ojson request = {{"conversations", ojson::array({render_request(c, worker.has_generation_blocks())})}};
  const ojson result = worker.exchange(request, "the test conversation")["results"][0];
  if (result.contains("error")) throw InputError(result["error"].get<std::string>());
  const std::vector<std::string> texts = result["texts"].get<std::vector<std::string>>();
  std::vector<ByteSpan> spans;
  if (worker.has_generation_blocks())
    for (const ojson& s : result["generation"]) spans.push_back({s[0].get<size_t>(), s[1].get<size_t>()});
  else
    spans = assistant_spans_from_prefixes(c, texts);
  return {texts[0], label_rendering(texts[0], spans, *qwen3_tokenizer())};
}

// The decoded runs of trained tokens.
std::vector<std::string> trained_runs(const LabeledTokens& tokens) {
  std::vector<std::string> runs;
  std::vector<int32_t> run;
  for (size_t i = 0; i <= tokens.ids.size(); ++i) {
    if (i < tokens.ids.size() && tokens.trained[i]) {
      run.push_back(tokens.ids[i]);
    } else if (!run.empty()) {
      runs.push_back(qwen3_tokenizer()->decode(run));
      run.clear();
    }
  }
  return runs;
}

Conversation conversation(const std::string& record, const ojson& kwargs = ojson::object()) {
  return conversation_from_record(parse(record), std::nullopt, kwargs);
}

TEST(ChatTemplateConversation, ShareGptTurnsBecomeOpenAiMessages) {
  const Conversation c = conversation(R"({"system": "Be brief.", "tools": "[{\"name\": \"f\"}]", "conversations": [
      {"from": "human", "value": "Hi"}, {"from": "function_call", "value": "{\"name\": \"f\", \"arguments\": {\"x\": 1}}"},
      {"from": "observation", "value": "2"}, {"from": "gpt", "value": "Done"}]})");
  EXPECT_EQ(c.messages, parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f",
      "arguments": {"x": 1}}}]}, {"role": "tool", "content": "2"}, {"role": "assistant", "content": "Done"}])"));
  EXPECT_EQ(c.tools, parse(R"([{"name": "f"}])"));
  EXPECT_EQ(c.assistant, (std::vector<size_t>{2, 4}));
}

TEST(ChatTemplateConversation, OpenAiMessagesKeepPartsToolCallsAndKwargs) {
  const Conversation c = conversation(
      R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "a.png"}, {"type": "text", "text": "?"}]},
          {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "g", "arguments": "{}"}}]}],
          "chat_template_kwargs": {"enable_thinking": false}})",
      parse(R"({"enable_thinking": true, "x": 1})"));
  EXPECT_EQ(c.messages[0]["content"][0]["image"], "a.png");
  EXPECT_EQ(c.messages[1]["content"], "");  // a tool-call-only turn reads as "" in templates
  EXPECT_EQ(c.kwargs, parse(R"({"enable_thinking": false, "x": 1})"));
  EXPECT_TRUE(c.tools.is_null());
}

TEST(ChatTemplateConversation, BadMessagesNameTheirIndex) {
  const auto message_of = [](const std::string& record) {
    try {
      conversation(record);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of(R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]})"),
            "message 1: unknown role 'bot' (expected system, user, assistant or tool)");
  EXPECT_EQ(message_of(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})"),
            "message 0, content part 0: a text part needs a \"text\" string");
  EXPECT_EQ(message_of(R"({"conversations": [{"from": "robot", "value": "x"}]})"),
            "turn 0: unknown \"from\" 'robot' (expected human, gpt, system, function_call or observation)");
  EXPECT_EQ(message_of(R"({"conversations": [{"from": "function_call", "value": "not json"}]})"),
            "turn 0: a function_call value must be JSON: {\"name\": ..., \"arguments\": ...} or a list");
}

// Qwen3's case: the turn rendered last gains an empty thinking block the whole rendering does not have.
TEST(ChatTemplateSpans, TurnThatIsNotAPrefixEndsWhereTheWholeRenderingContinuesIt) {
  Conversation c;
  c.messages = parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"},
                         {"role": "user", "content": "R"}])");
  c.assistant = {1};
  const std::vector<std::string> texts = {"<u>Q</u>\n<a>A</a>\n<u>R</u>\n", "<u>Q</u>\n<a>",
                                          "<u>Q</u>\n<a><think></think>A</a>\n"};
  const std::vector<ByteSpan> spans = assistant_spans_from_prefixes(c, texts);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(texts[0].substr(spans[0].begin, spans[0].end - spans[0].begin), "A</a>");
}

TEST(ChatTemplateSpans, AnAssistantTurnRenderedToNothingIsAnError) {
  Conversation c;
  c.messages = parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}])");
  c.assistant = {1};
  const std::vector<std::string> texts = {"<u>Q</u>\n", "<u>Q</u>\n<a>", "<u>Q</u>\n<a>A</a>\n"};
  EXPECT_THROW(assistant_spans_from_prefixes(c, texts), InputError);
}

TEST(ChatTemplateSpans, ACutInsideATokenFailsLoudly) {
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::string text = "<|im_start|>assistant\nHello world<|im_end|>";
  const size_t hello = text.find("Hello");
  // "Hel" | "lo world": the whole text holds the one token "Hello".
  const std::vector<ByteSpan> inside = {{hello + 3, text.size()}};
  EXPECT_THROW(label_rendering(text, inside, *tok), InputError);
  const std::vector<ByteSpan> clean = {{hello, text.size()}};
  const LabeledTokens tokens = label_rendering(text, clean, *tok);
  EXPECT_EQ(tokens.ids, tok->encode(text));
  EXPECT_EQ(trained_runs(tokens), std::vector<std::string>{"Hello world<|im_end|>"});
}

TEST(ChatTemplateQwen3, ThinkingTurnRendersAndTrainsTheAssistantTurn) {
  ASSERT_TRUE(qwen3_tokenizer());
  auto worker = start_worker("model");
  EXPECT_FALSE(worker->has_generation_blocks());
  const Rendered r = render(*worker, conversation(R"({"messages": [{"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "add"}]})"));
  EXPECT_EQ(r.text, "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nadd\n</think>\n\n4<|im_end|>\n");
  EXPECT_EQ(r.tokens.ids, qwen3_tokenizer()->encode(r.text));
  EXPECT_EQ(trained_runs(r.tokens), std::vector<std::string>{"<think>\nadd\n</think>\n\n4<|im_end|>"});
}

TEST(ChatTemplateQwen3, ThinkingOffMultiTurnTrainsEachAnswer) {
  ASSERT_TRUE(qwen3_tokenizer());
  auto worker = start_worker("model");
  const Rendered r = render(*worker, conversation(R"({"system": "S", "conversations": [{"from": "human", "value": "Hi"},
      {"from": "gpt", "value": "Hello!"}, {"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}]})",
                                                  parse(R"({"enable_thinking": false})")));
  EXPECT_EQ(r.text,
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n");
  EXPECT_EQ(trained_runs(r.tokens), (std::vector<std::string>{"Hello!<|im_end|>", "4<|im_end|>"}));
}

TEST(ChatTemplateQwen3, ToolsToolCallsAndToolResults) {
  ASSERT_TRUE(qwen3_tokenizer());
  auto worker = start_worker("model");
  const Rendered r = render(*worker, conversation(R"({"tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
      "messages": [{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather",
       "arguments": {"city": "Paris"}}}]}, {"role": "tool", "content": "18C"},
      {"role": "assistant", "content": "It is 18C."}]})"));
  EXPECT_EQ(r.text,
            "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 18C.<|im_end|>\n");
  EXPECT_EQ(trained_runs(r.tokens),
            (std::vector<std::string>{
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>",
                "<think>\n\n</think>\n\nIt is 18C.<|im_end|>"}));
}

TEST(ChatTemplateQwen3Vl, ImageAndVideoPartsBecomePlaceholders) {
  ASSERT_TRUE(qwen3_tokenizer());
  auto worker = start_worker(kModelTemplates + "/qwen3_vl_chat_template.json");
  const Rendered r = render(*worker, conversation(R"({"messages": [{"role": "user", "content": [
      {"type": "image", "image": "cat.png"}, {"type": "video", "video": "v.mp4"}, {"type": "text", "text": "What?"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}]})"));
  EXPECT_EQ(r.text,
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|video_pad|><|vision_end|>"
            "What?<|im_end|>\n<|im_start|>assistant\nA cat.<|im_end|>\n");
  EXPECT_EQ(trained_runs(r.tokens), std::vector<std::string>{"A cat.<|im_end|>"});
}

TEST(ChatTemplateWorker, GenerationBlocksMarkTheTrainedText) {
  ASSERT_TRUE(qwen3_tokenizer());
  const std::string path = ::testing::TempDir() + "generation.jinja";
  std::ofstream(path) << "{% for m in messages %}<|im_start|>{{ m.role }}\n"
                         "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}"
                         "{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}";
  auto worker = start_worker(path);
  EXPECT_TRUE(worker->has_generation_blocks());
  const Rendered r = render(*worker, conversation(R"({"messages": [{"role": "user", "content": "Ça va?"},
      {"role": "assistant", "content": "Oui."}]})"));
  EXPECT_EQ(r.text, "<|im_start|>user\nÇa va?<|im_end|><|im_start|>assistant\nOui.<|im_end|>");
  EXPECT_EQ(trained_runs(r.tokens), std::vector<std::string>{"Oui.<|im_end|>"});
}

TEST(ChatTemplateWorker, TemplateErrorsBelongToTheirConversation) {
  const std::string path = ::testing::TempDir() + "raises.jinja";
  std::ofstream(path) << "{% if messages|length > 1 %}{{ raise_exception('one message only') }}{% endif %}x";
  auto worker = start_worker(path);
  const ojson two = render_request(conversation(R"({"messages": [{"role": "user", "content": "a"},
      {"role": "assistant", "content": "b"}]})"), false);
  const ojson one = render_request(conversation(R"({"messages": [{"role": "user", "content": "a"}]})"), false);
  const ojson reply = worker->exchange({{"conversations", {two, one}}}, "two conversations");
  EXPECT_EQ(reply["results"][0]["error"], "one message only");
  EXPECT_EQ(reply["results"][1]["texts"][0], "x");
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  const char* name_;
};

std::string start_error(const std::string& spec) {
  try {
    start_worker(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ChatTemplateWorker, MissingNodeOrPackageIsAnInputErrorWithAHint) {
  {
    ScopedEnv env("VEOMNI_NODE", "/nonexistent/node");
    const std::string message = start_error("model");
    EXPECT_NE(message.find("cannot run '/nonexistent/node'"), std::string::npos) << message;
    EXPECT_NE(message.find("scripts/setup.sh"), std::string::npos) << message;
  }
  ScopedEnv env("VEOMNI_NODE_MODULES", "/nonexistent");
  const std::string message = start_error("model");
  EXPECT_NE(message.find("cannot load @huggingface/jinja"), std::string::npos) << message;
}

TEST(ChatTemplateWorker, AWorkerThatDiesDoesNotHang) {
  const std::string script = ::testing::TempDir() + "dies.mjs";
  std::ofstream(script) << "process.stderr.write('boom\\n'); process.exit(7);\n";
  ScopedEnv env("VEOMNI_CHAT_TEMPLATE_WORKER", script);
  const std::string message = start_error("model");
  EXPECT_NE(message.find("exited with status 7"), std::string::npos) << message;
  EXPECT_NE(message.find("boom"), std::string::npos) << message;
}

TEST(ChatTemplateSource, ModelTemplateLookupAndSpecialTokens) {
  const ChatTemplateSource qwen3 = load_chat_template("model", kQwen3TokenizerPath);
  EXPECT_NE(qwen3.origin.find("tokenizer_config.json"), std::string::npos);
  EXPECT_NE(qwen3.text.find("enable_thinking"), std::string::npos);
  EXPECT_EQ(qwen3.globals, parse(R"({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})"));
  EXPECT_THROW(load_chat_template("/nonexistent.jinja", kQwen3TokenizerPath), InputError);
}

#ifdef VEOMNI_CHAT_TEMPLATE_FIXTURES
// transformers' apply_chat_template on the conversations of scripts/gen_chat_template_fixtures.py: the same text,
// the same ids, and (where the template has {% generation %} blocks) the same assistant mask.
TEST(ChatTemplateFixtures, TransformersRenderingsMatch) {
  ASSERT_TRUE(qwen3_tokenizer());
  std::ifstream in(std::string(VEOMNI_FIXTURES_DIR) + "/chat_templates/transformers_renderings.jsonl");
  ASSERT_TRUE(in) << "tests/fixtures/chat_templates/transformers_renderings.jsonl is missing: run "
                     "scripts/gen_chat_template_fixtures.py";
  std::map<std::string, std::unique_ptr<ChatTemplateWorker>> workers;
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const ojson fixture = ojson::parse(line);
    const std::string spec = fixture["template"] == "qwen3"
                                 ? std::string("model")
                                 : kModelTemplates + "/" + fixture["template"].get<std::string>();
    if (!workers.count(spec)) workers[spec] = start_worker(spec);
    SCOPED_TRACE(fixture["name"].get<std::string>());
    const Conversation c = conversation_from_record(fixture["record"], std::nullopt, ojson::object());
    EXPECT_EQ(c.messages, fixture["messages"]);
    const Rendered r = render(*workers[spec], c);
    EXPECT_EQ(r.text, fixture["text"].get<std::string>());
    EXPECT_EQ(r.tokens.ids, fixture["ids"].get<std::vector<int32_t>>());
    if (fixture.contains("assistant_mask") && !fixture["assistant_mask"].is_null()) {
      EXPECT_EQ(std::vector<int>(r.tokens.trained.begin(), r.tokens.trained.end()),
                fixture["assistant_mask"].get<std::vector<int>>());
    }
    ++cases;
  }
  EXPECT_GT(cases, 0);
}
#endif

}  // namespace
}  // namespace veomni
