// The checks that a call fails with an InputError (exit 2 in the tools), or with an internal error (a veomni::Error
// that is no InputError), whose message holds given fragments.
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <vector>

#include "core/error.h"

namespace veomni::testing {

// Fails the test when f returns, throws anything but an InputError, or the message lacks one of the fragments.
template <typename F>
void expect_input_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no InputError thrown";
  } catch (const InputError& e) {
    const std::string what = e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(what.find(fragment), std::string::npos) << what << "\n  lacks: " << fragment;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an InputError: " << e.what();
  }
}

// The message of the InputError that f throws; fails the test (and returns "") when f throws none.
template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError thrown";
  return "";
}

// Fails the test when f returns, throws an InputError or anything but a veomni::Error, or the message lacks one of
// the fragments: a broken internal invariant, reported as an error rather than a crash.
template <typename F>
void expect_internal_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no Error thrown";
  } catch (const InputError& e) {
    ADD_FAILURE() << "an InputError, not an internal error: " << e.what();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(what.find(fragment), std::string::npos) << what << "\n  lacks: " << fragment;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a veomni::Error: " << e.what();
  }
}

}  // namespace veomni::testing
