// Unit tests of the checkpoint files: directory naming, `latest`, rotation, staged directories, metadata.json and
// rank shard files (round trips and every validation), and the collective save with its crash points.
#include <gtest/gtest.h>

#include "ckpt/checkpoint_dir.h"
#include "ckpt/checkpoint_restore.h"
#include "ckpt/checkpoint_save.h"
#include "ckpt/file_checksum.h"
#include "ckpt/staged_directory.h"
#include "io/json_file.h"
#include "test_ckpt_util.h"
#include "test_model_util.h"

using namespace veomni;
using namespace veomni::test;

namespace {

class CheckpointDir : public ScratchDir {
 protected:
  // A directory that looks like a complete (metadata.json) or unfinished checkpoint.
  void make(const std::string& name, bool complete) {
    fs::create_directories(dir_ / "checkpoints" / name);
    if (complete) write_bytes((dir_ / "checkpoints" / name / kCheckpointMetadataFile).string(), "{}");
  }
  std::string ckpts() const { return (dir_ / "checkpoints").string(); }
};

TEST(CheckpointDirNames, FormatAndParse) {
  EXPECT_EQ(checkpoint_dir_name(12), "global_step_12");
  EXPECT_EQ(parse_checkpoint_dir_name("global_step_12"), 12);
  EXPECT_EQ(parse_checkpoint_dir_name("global_step_0"), 0);
  EXPECT_FALSE(parse_checkpoint_dir_name("global_step_12.tmp-77"));
  EXPECT_FALSE(parse_checkpoint_dir_name("global_step_"));
  EXPECT_FALSE(parse_checkpoint_dir_name("global_step_-1"));
  EXPECT_FALSE(parse_checkpoint_dir_name("latest"));
  EXPECT_EQ(rank_file_name(2, 4), "rank-00002-of-00004.h5");
  EXPECT_TRUE(is_temporary_name("global_step_3.tmp-123"));
  EXPECT_FALSE(is_temporary_name("global_step_3"));
}

TEST_F(CheckpointDir, FileChecksumsSeeEveryByteAndRoundTripTheirText) {
  write_bytes(path("a"), "0123456789abcdefXYZ");
  const uint64_t a = file_checksum(path("a"));
  write_bytes(path("b"), "0123456789abcdefXYz");
  write_bytes(path("c"), std::string("0123456789abcdefXYZ\0", 20));
  EXPECT_NE(file_checksum(path("b")), a);
  EXPECT_NE(file_checksum(path("c")), a);  // a trailing zero byte changes the length
  EXPECT_EQ(file_checksum(path("a")), a);
  EXPECT_EQ(parse_checksum(format_checksum(a)), a);
  EXPECT_EQ(format_checksum(0x1f), "fnv1a64w:000000000000001f");
  EXPECT_FALSE(parse_checksum("fnv1a64w:xyz"));
  EXPECT_FALSE(parse_checksum("crc32:000000000000001f"));
  expect_input_error([&] { file_checksum(path("none")); }, {"none"});
}

TEST_F(CheckpointDir, ListingSkipsUnfinishedAndTemporaryDirectories) {
  make("global_step_2", true);
  make("global_step_10", true);
  make("global_step_4.tmp-99", true);
  make("global_step_8", false);
  const std::vector<CheckpointEntry> all = list_checkpoints(ckpts());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step, 2);
  EXPECT_EQ(all[1].step, 10);
}

TEST_F(CheckpointDir, AutoResumeFollowsLatestElseNewestCompleteElseNothing) {
  const std::string out = dir_.string();
  EXPECT_FALSE(find_resume_checkpoint("auto", out));  // no checkpoints directory at all
  EXPECT_FALSE(find_resume_checkpoint("", out));
  make("global_step_2", true);
  make("global_step_4", true);
  make("global_step_6.tmp-5", true);
  EXPECT_EQ(find_resume_checkpoint("auto", out), (dir_ / "checkpoints/global_step_4").string());
  write_latest(ckpts(), 2);  // a crash after global_step_4's rename but before its `latest`
  EXPECT_EQ(read_bytes((dir_ / "checkpoints/latest").string()), "global_step_2\n");
  EXPECT_EQ(find_resume_checkpoint("auto", out), (dir_ / "checkpoints/global_step_2").string());
  EXPECT_EQ(find_resume_checkpoint(path("checkpoints/global_step_4"), out), path("checkpoints/global_step_4"));
}

TEST_F(CheckpointDir, LoadPathsResolveFromCheckpointCheckpointsOrRunDirectory) {
  make("global_step_3", true);
  write_latest(ckpts(), 3);
  const std::string expected = path("checkpoints/global_step_3");
  EXPECT_EQ(resolve_checkpoint_path(expected), expected);
  EXPECT_EQ(resolve_checkpoint_path(ckpts()), expected);
  EXPECT_EQ(resolve_checkpoint_path(dir_.string()), expected);
  expect_input_error([&] { resolve_checkpoint_path(path("nowhere")); }, {"nowhere", "does not exist"});
  make("global_step_5", false);
  expect_input_error([&] { resolve_checkpoint_path(path("checkpoints/global_step_5")); },
                     {"global_step_5", "is not a checkpoint"});
}

TEST_F(CheckpointDir, BadLatestIsAnInputErrorNamingIt) {
  make("global_step_3", true);
  write_bytes(path("checkpoints/latest"), "garbage\n");
  expect_input_error([&] { find_resume_checkpoint("auto", dir_.string()); }, {"checkpoints/latest", "garbage"});
  write_bytes(path("checkpoints/latest"), "global_step_9\n");
  expect_input_error([&] { find_resume_checkpoint("auto", dir_.string()); },
                     {"checkpoints/latest", "global_step_9", "not a complete checkpoint"});
}

TEST_F(CheckpointDir, RotationKeepsTheNewestAndTheProtectedOne) {
  for (int step : {1, 2, 3, 4, 5}) make(checkpoint_dir_name(step), true);
  EXPECT_TRUE(rotate_checkpoints(ckpts(), 0, 5).empty());  // 0 keeps all
  EXPECT_EQ(rotate_checkpoints(ckpts(), 3, 5).size(), 2u);
  std::vector<int64_t> left;
  for (const CheckpointEntry& e : list_checkpoints(ckpts())) left.push_back(e.step);
  EXPECT_EQ(left, (std::vector<int64_t>{3, 4, 5}));
  // A run resumed from an older checkpoint saves step 2 again: it is protected, the oldest others go.
  make("global_step_2", true);
  rotate_checkpoints(ckpts(), 2, 2);
  left.clear();
  for (const CheckpointEntry& e : list_checkpoints(ckpts())) left.push_back(e.step);
  EXPECT_EQ(left, (std::vector<int64_t>{2, 5}));
  for (const auto& e : fs::directory_iterator(ckpts())) EXPECT_FALSE(is_temporary_name(e.path().filename().string()));
}

TEST_F(CheckpointDir, StagedDirectoryAppearsWholeOrNotAtAll) {
  const std::string out = path("hf");
  {
    StagedDirectory staged(out, false);
    write_bytes(staged.file("a.txt"), "a");
    EXPECT_TRUE(fs::exists(staged.temp_path()));
    EXPECT_FALSE(fs::exists(out));
  }  // not committed: nothing under the final name, no temporary left
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(dir_));
  {
    StagedDirectory staged(out, false);
    write_bytes(staged.file("b.txt"), "b");
    staged.commit();
  }
  EXPECT_EQ(read_bytes(out + "/b.txt"), "b");
  expect_input_error([&] { StagedDirectory again(out, false); }, {"hf", "not empty", "--overwrite"});
  {
    StagedDirectory staged(out, true);
    write_bytes(staged.file("c.txt"), "c");
    staged.commit();
  }
  EXPECT_FALSE(fs::exists(out + "/b.txt"));
  EXPECT_EQ(read_bytes(out + "/c.txt"), "c");
  fs::create_directories(path("x.tmp-1"));
  write_bytes(path("y.tmp-2"), "y");
  EXPECT_EQ(remove_temporaries(dir_.string()), 2);
  EXPECT_TRUE(fs::exists(out));
  expect_input_error([&] { StagedDirectory s(path("missing/parent/out"), false); }, {"does not exist"});
  {
    StagedDirectory slash(path("with_slash") + "//", false);  // the temporary directory sits beside, not inside
    EXPECT_EQ(slash.final_path(), path("with_slash"));
    EXPECT_EQ(fs::path(slash.temp_path()).parent_path(), dir_);
    slash.commit();
  }
  EXPECT_TRUE(fs::is_directory(path("with_slash")));
}

class CheckpointFiles : public ScratchDir {
 protected:
  ModelConfig config = tiny_moe_config(false);
  ParamList params{config};
  std::map<ShardField, FullTensors> state = random_state(params, 7);
  MeshShape mesh{4, 2, 2};
  TrainingPosition position{12, 12, 1, 3, 42, 40, 2.5e-4};
};

TEST_F(CheckpointFiles, MetadataRoundTripsAndRecordsEveryParameter) {
  const CheckpointMetadata written = write_checkpoint(path("ck"), config, params, state, mesh, position);
  const CheckpointMetadata read = read_checkpoint_metadata(path("ck"));
  EXPECT_EQ(read.position, position);
  EXPECT_EQ(read.mesh.world, 4);
  EXPECT_EQ(read.mesh.ulysses, 2);
  EXPECT_EQ(read.mesh.ep, 2);
  EXPECT_EQ(read.params, written.params);
  EXPECT_TRUE(model_architecture_differences(read.model_config, config).empty());
  ASSERT_EQ(read.rank_files.size(), 4u);
  EXPECT_EQ(read.rank_files[3].file, "rank-00003-of-00004.h5");
  EXPECT_FALSE(read.data_plan.has_value());
  const nlohmann::json j = read_json_file(path("ck/metadata.json"));
  EXPECT_EQ(j["format"], "veomni-checkpoint");
  EXPECT_EQ(j["format_version"], 1);
  nlohmann::json gate_up;
  for (const nlohmann::json& entry : j["parameters"])
    if (entry["name"] == "model.layers.0.mlp.experts.gate_up_proj") gate_up = entry;
  EXPECT_EQ(gate_up["shape"], nlohmann::json::array({4, 16, 16}));
  EXPECT_EQ(gate_up["dtype"], "f32");
  EXPECT_EQ(gate_up["shard"]["kind"], "ep+fsdp");
  EXPECT_EQ(gate_up["shard"]["group_size"], 2);
  EXPECT_EQ(gate_up["shard"]["shard_numel"], 256);  // 2 experts x 16 x 16 over 2 ranks
}

// A mixed run's data plan (data.datasets) needs format version 4; a single dataset's keeps the oldest version.
TEST_F(CheckpointFiles, MixedDataPlanIsVersionFourAndOlderFilesStillRead) {
  const CheckpointMetadata written = write_checkpoint(path("ck"), config, params, state, mesh, position);
  CheckpointMetadata m = written;
  m.data_plan = DataPlanInfo{"", 300, 2, 64, 32, true, {{"a.h5", "math", 0.7, 100}, {"b.h5", "code", 0.3, 200}}};
  nlohmann::json j = nlohmann::json::parse(checkpoint_metadata_to_json(m).dump());
  EXPECT_EQ(j["format_version"], 4);
  EXPECT_EQ(j["data_plan"]["sources"][1]["name"], "code");
  const CheckpointMetadata back = checkpoint_metadata_from_json(j, "m.json");
  ASSERT_TRUE(back.data_plan.has_value());
  EXPECT_EQ(*back.data_plan, *m.data_plan);
  j["format_version"] = 3;
  expect_input_error([&] { checkpoint_metadata_from_json(j, "m.json"); },
                     {"m.json", "'data_plan.sources' needs format_version 4"});
  j["format_version"] = 4;
  j["data_plan"]["sources"][0].erase("weight");
  expect_input_error([&] { checkpoint_metadata_from_json(j, "m.json"); }, {"m.json", "data_plan.sources[0].weight"});
  m.data_plan = DataPlanInfo{"data.h5", 64, 4, 64, 64, true};
  j = nlohmann::json::parse(checkpoint_metadata_to_json(m).dump());
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_FALSE(j["data_plan"].contains("sources"));
  EXPECT_EQ(*checkpoint_metadata_from_json(j, "m.json").data_plan, *m.data_plan);
}

// bfloat16 AdamW moments (anyprecision_adamw) are named by key 'optimizer', format version 5; adamw's checkpoints keep
// the oldest version and no key.
TEST_F(CheckpointFiles, Bf16MomentsAreVersionFiveWithTheirOptimizer) {
  CheckpointMetadata m = write_checkpoint(path("ck"), config, params, state, mesh, position);
  EXPECT_EQ(m.optimizer_type, "adamw");
  nlohmann::json j = nlohmann::json::parse(checkpoint_metadata_to_json(m).dump());
  EXPECT_FALSE(j.contains("optimizer"));
  EXPECT_EQ(j["format_version"], 1);
  m.optimizer_type = "anyprecision_adamw";
  j = nlohmann::json::parse(checkpoint_metadata_to_json(m).dump());
  EXPECT_EQ(j["format_version"], 5);
  EXPECT_EQ(j["optimizer"], nlohmann::json({{"type", "anyprecision_adamw"}, {"moment_dtype", "bf16"}}));
  EXPECT_EQ(checkpoint_metadata_from_json(j, "m.json").optimizer_type, "anyprecision_adamw");
  nlohmann::json bad = j;
  bad["optimizer"]["moment_dtype"] = "f32";
  expect_input_error([&] { checkpoint_metadata_from_json(bad, "m.json"); }, {"m.json", "optimizer", "bf16"});
  bad = j;
  bad["optimizer"].erase("type");
  expect_input_error([&] { checkpoint_metadata_from_json(bad, "m.json"); }, {"m.json", "optimizer.type"});
  bad = j;
  bad["format_version"] = 4;
  expect_input_error([&] { checkpoint_metadata_from_json(bad, "m.json"); },
                     {"m.json", "'optimizer' needs format_version 5"});
}

TEST_F(CheckpointFiles, MetadataValidationNamesFileAndKey) {
  write_checkpoint(path("ck"), config, params, state, mesh, position);
  const std::string file = path("ck/metadata.json");
  const nlohmann::json good = read_json_file(file);
  auto with = [&](auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    write_json_file(file, j);
  };
  with([](nlohmann::json& j) { j["format_version"] = 6; });
  expect_input_error([&] { read_checkpoint_metadata(path("ck")); }, {"metadata.json", "format version 6"});
  with([](nlohmann::json& j) { j["parameters"][0]["shard"]["shard_numel"] = 5; });
  expect_input_error([&] { read_checkpoint_metadata(path("ck")); }, {"metadata.json", "model.embed_tokens.weight"});
  with([](nlohmann::json& j) { j["rank_files"].erase(3); });
  expect_input_error([&] { read_checkpoint_metadata(path("ck")); }, {"rank_files", "3 files", "world of 4"});
  with([](nlohmann::json& j) { j["position"].erase("epoch"); });
  expect_input_error([&] { read_checkpoint_metadata(path("ck")); }, {"metadata.json", "position.epoch"});
  with([](nlohmann::json& j) { j["format"] = "something-else"; });
  expect_input_error([&] { read_checkpoint_metadata(path("ck")); }, {"not a veomni checkpoint"});
  write_bytes(file, "{\"format\": ");
  expect_input_error([&] { read_checkpoint_metadata(path("ck")); }, {"metadata.json", "invalid JSON"});
  fs::remove(file);
  expect_input_error([&] { read_checkpoint_metadata(path("ck")); }, {"not a checkpoint directory"});
}

TEST_F(CheckpointFiles, RankFilesRoundTripAndCheckTheirIdentity) {
  write_checkpoint(path("ck"), config, params, state, mesh, position);
  const std::string file = path("ck/rank-00001-of-00004.h5");
  const RankShardReader reader(file, 1, mesh, 12);
  EXPECT_EQ(reader.position(), position);
  const Parameter& p = *params.all()[0];
  const Tensor expected = shard_of(state[ShardField::ExpAvg][p.name], p.shape, false, mesh, 1);
  std::vector<float> got(static_cast<size_t>(expected.numel()));
  reader.read(ShardField::ExpAvg, p.name, expected.numel(), 0, expected.numel(), got.data());
  EXPECT_EQ(got, expected.to_float_vector());
  expect_input_error([&] { RankShardReader(file, 2, mesh, 12); }, {file, "holds rank 1", "expects rank 2"});
  expect_input_error([&] { RankShardReader(file, 1, mesh, 13); }, {file, "written at step 12", "step 13"});
  expect_input_error([&] { reader.read(ShardField::Master, "nope", 4, 0, 4, got.data()); }, {file, "nope"});
  expect_input_error([&] { reader.read(ShardField::Master, p.name, 5, 0, 4, got.data()); }, {file, "f32[5]"});
}

TEST_F(CheckpointFiles, ReaderRejectsMissingTruncatedAndCorruptRankFiles) {
  write_checkpoint(path("ck"), config, params, state, mesh, position);
  const std::string file = path("ck/rank-00002-of-00004.h5");
  const std::string original = read_bytes(file);

  const Parameter& p = *params.all()[0];
  ASSERT_TRUE(corrupt_tensor_bytes(file, shard_of(state[ShardField::Master][p.name], p.shape, false, mesh, 2)));
  {
    const CheckpointReader reader(path("ck"));  // same size: found when the bytes are read (checksums)
    expect_input_error([&] { reader.read_full(0, ShardField::Master); }, {file});
  }
  // Any damaged byte, HDF5 metadata included (which has no checksum of its own), fails the file's checksum.
  for (size_t offset : {size_t{100}, size_t{4096}, original.size() / 2, original.size() - 1}) {
    std::string damaged = original;
    damaged[offset] = static_cast<char>(damaged[offset] ^ 0x01);
    write_bytes(file, damaged);
    const CheckpointReader reader(path("ck"));
    expect_input_error([&] { reader.read_full(0, ShardField::Master); }, {file, "checksum", "damaged"});
  }
  write_bytes(file, original.substr(0, original.size() / 2));
  expect_input_error([&] { CheckpointReader r(path("ck")); }, {file, "truncated"});
  fs::remove(file);
  expect_input_error([&] { CheckpointReader r(path("ck")); }, {file, "missing"});
  write_bytes(file, original);
  EXPECT_NO_THROW(CheckpointReader(path("ck")).read_full(0, ShardField::Master));
}

TEST_F(CheckpointFiles, DifferentModelIsRejectedNamingTheKeys) {
  write_checkpoint(path("ck"), config, params, state, mesh, position);
  const CheckpointReader reader(path("ck"));
  ModelConfig other = config;
  other.num_experts = 8;
  ParamList other_params(other);
  std::vector<ParamShardState> shards;
  for (const auto& p : other_params.all()) shards.push_back({p->name, p->shape, p->is_expert, {}, {}, {}});
  expect_input_error([&] { check_checkpoint_model(reader, other, ModelHead::LanguageModel, shards); },
                     {"metadata.json", "different model", "num_local_experts: 4 vs 8"});
}

// The trainer's save on one rank: files, metrics, `latest`, rotation, crash points, and restore under other meshes.
class CheckpointSave : public CheckpointFiles {
 protected:
  std::vector<ParamShardState> shards_for(const MeshShape& m, int64_t rank) {
    std::vector<ParamShardState> out;
    for (const auto& p : params.all()) {
      ParamShardState s{p->name, p->shape, p->is_expert, {}, {}, {}};
      for (ShardField f : kShardFields) s.field(f) = shard_of(state[f][p->name], p->shape, p->is_expert, m, rank);
      out.push_back(std::move(s));
    }
    return out;
  }
  CheckpointSaveRequest request(int64_t step, MetricsLog* log) {
    CheckpointSaveRequest r;
    r.output_dir = path("run");
    r.save_total_limit = 2;
    r.mesh = MeshShape{1, 1, 1};
    r.position = position;
    r.position.global_step = step;
    r.data_plan = DataPlanInfo{"data.h5", 64, 4, 64, 64, true};
    r.model_config = config;
    r.train_config_yaml = "train:\n  seed: 42\n";
    r.producer = "test";
    r.metrics = log;
    return r;
  }
  LocalCommunicator world;
};

TEST_F(CheckpointSave, SavesLatestRotatesAndRestoresUnderAnyLayout) {
  MetricsLog log;
  std::vector<ParamShardState> mine = shards_for({1, 1, 1}, 0);
  for (int64_t step = 1; step <= 3; ++step) {
    log.append({{"loss", 1.0 / static_cast<double>(step)}, {"grad_norm", 0.5}});
    save_checkpoint(world, request(step, &log), mine);
  }
  EXPECT_EQ(read_bytes(path("run/checkpoints/latest")), "global_step_3\n");
  EXPECT_FALSE(fs::exists(path("run/checkpoints/global_step_1")));  // save_total_limit 2
  const CheckpointReader reader(path("run/checkpoints/global_step_3"));
  EXPECT_EQ(reader.metadata().position.global_step, 3);
  EXPECT_EQ(reader.metadata().train_config_yaml, "train:\n  seed: 42\n");
  ASSERT_TRUE(reader.metadata().data_plan.has_value());
  EXPECT_EQ(reader.metadata().data_plan->num_samples, 64);
  const MetricsLog saved_log = reader.metrics();
  EXPECT_EQ(saved_log.num_steps(), 3u);
  EXPECT_EQ(saved_log.values("loss")[2], 1.0 / 3.0);

  for (const MeshShape& m : {MeshShape{1, 1, 1}, MeshShape{2, 1, 2}, MeshShape{4, 2, 2}, MeshShape{3, 1, 1},
                             MeshShape{8, 2, 4}}) {
    for (int64_t r = 0; r < m.world; ++r) {
      std::vector<ParamShardState> restored = shards_for(m, r);
      for (ParamShardState& s : restored)
        for (ShardField f : kShardFields) s.field(f).zero_();
      check_checkpoint_model(reader, config, ModelHead::LanguageModel, restored);
      restore_param_shards(reader, m, r, restored);
      const std::vector<ParamShardState> expected = shards_for(m, r);
      for (size_t i = 0; i < restored.size(); ++i)
        for (ShardField f : kShardFields)
          ASSERT_EQ(restored[i].field(f).to_float_vector(), expected[i].field(f).to_float_vector())
              << m.describe() << " rank " << r << " " << restored[i].name << " " << shard_field_name(f);
    }
  }
}

TEST_F(CheckpointSave, CrashPointsLeaveTheLastCompleteCheckpointInCharge) {
  MetricsLog log;
  log.append({{"loss", 1.0}});
  std::vector<ParamShardState> mine = shards_for({1, 1, 1}, 0);
  save_checkpoint(world, request(1, &log), mine);
  log.append({{"loss", 0.5}});
  // Fails while writing its shard (a full disk): nothing of step 2 is left, `latest` still names step 1. (A writer
  // killed there leaves its temporary directory to the next start's remove_temporaries: the integration tests.)
  CheckpointSaveRequest failing = request(2, &log);
  failing.fault_point = [](const std::string& point) {
    if (point == "rank_file") throw Error("No space left on device");
  };
  EXPECT_THROW(save_checkpoint(world, failing, mine), Error);
  EXPECT_EQ(find_resume_checkpoint("auto", path("run")), path("run/checkpoints/global_step_1"));
  EXPECT_FALSE(fs::exists(path("run/checkpoints/global_step_2")));
  EXPECT_EQ(remove_temporaries(path("run/checkpoints")), 0);
  // Dies after the rename, before `latest`: step 2 is complete, `latest` still says 1 (a later save replaces it).
  CheckpointSaveRequest late = request(2, &log);
  late.fault_point = [](const std::string& point) {
    if (point == "commit") throw Error("killed");
  };
  EXPECT_THROW(save_checkpoint(world, late, mine), Error);
  EXPECT_TRUE(fs::exists(path("run/checkpoints/global_step_2/metadata.json")));
  EXPECT_EQ(find_resume_checkpoint("auto", path("run")), path("run/checkpoints/global_step_1"));
  save_checkpoint(world, request(2, &log), mine);
  EXPECT_EQ(find_resume_checkpoint("auto", path("run")), path("run/checkpoints/global_step_2"));
  for (const auto& e : fs::directory_iterator(path("run/checkpoints")))
    EXPECT_FALSE(is_temporary_name(e.path().filename().string())) << e.path();
}

TEST_F(CheckpointSave, NonFiniteMetricsSurviveTheCheckpoint) {
  MetricsLog log;
  log.append({{"loss", std::numeric_limits<double>::quiet_NaN()}});
  save_checkpoint(world, request(1, &log), shards_for({1, 1, 1}, 0));
  const MetricsLog back = CheckpointReader(path("run/checkpoints/global_step_1")).metrics();
  EXPECT_TRUE(std::isnan(back.values("loss")[0]));
}

}  // namespace
