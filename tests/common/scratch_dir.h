// A gtest fixture giving each test a fresh scratch directory under the system temp dir, removed afterwards.
#pragma once
#include <gtest/gtest.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace veomni::testing {

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("veomni_{}_{}_{}", info->test_suite_name(), info->name(), ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

}  // namespace veomni::testing
