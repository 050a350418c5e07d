// Deadline-bound waits for non-blocking MPI collectives: poll, then sleep with backoff; on timeout a census over a
// duplicate of the world communicator tells which ranks of the group are waiting where, and which do not answer.
#include "dist/mpi_collective_wait.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "core/error.h"
#include "core/tool.h"
#include "dist/collective_timeout.h"

namespace veomni::mpi_detail {

namespace {

using Clock = std::chrono::steady_clock;

// The census: a rank whose collective timed out sends kAskTag to the group's other members; every rank that is
// itself waiting in a collective (or in its own census) answers kReplyTag with where it waits.
constexpr int kAskTag = 31001;
constexpr int kReplyTag = 31002;
MPI_Comm census_comm = MPI_COMM_NULL;

// Where this rank waits, as sent in a census reply (plain bytes: the same binary runs on every rank).
struct WaitState {
  char op[32] = {0};
  char group[64] = {0};
  int64_t seq = 0;
};

// The collective this rank waits in now; only the main thread calls MPI (MPI_THREAD_FUNNELED).
WaitState current_wait;

struct ReplyInFlight {
  std::unique_ptr<WaitState> message;
  MPI_Request request = MPI_REQUEST_NULL;
};
std::vector<ReplyInFlight>& replies_in_flight() {
  static std::vector<ReplyInFlight> replies;
  return replies;
}

void copy_text(char* out, size_t size, const std::string& text) {
  std::memset(out, 0, size);
  std::memcpy(out, text.data(), std::min(size - 1, text.size()));
}

void answer_census_asks() {
  if (census_comm == MPI_COMM_NULL) return;
  auto& replies = replies_in_flight();
  std::erase_if(replies, [](ReplyInFlight& reply) {
    int done = 0;
    MPI_Test(&reply.request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAskTag, census_comm, &pending, &status) != MPI_SUCCESS || !pending) return;
    int64_t asked_seq = 0;
    MPI_Recv(&asked_seq, 1, MPI_INT64_T, status.MPI_SOURCE, kAskTag, census_comm, MPI_STATUS_IGNORE);
    ReplyInFlight reply{std::make_unique<WaitState>(current_wait), MPI_REQUEST_NULL};
    MPI_Isend(reply.message.get(), sizeof(WaitState), MPI_BYTE, status.MPI_SOURCE, kReplyTag, census_comm,
              &reply.request);
    replies.push_back(std::move(reply));
  }
}

// How long the census waits for answers: the ranks that wait answer within milliseconds.
double census_grace_seconds(double timeout) { return std::clamp(timeout / 10, 1.0, 5.0); }

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

[[noreturn]] void report_timeout(const CollectiveId& id, const std::vector<int>& members, double timeout) {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::vector<int> others;
  for (int m : members)
    if (m != me) others.push_back(m);
  static int64_t ask = 0;
  ask = id.seq;
  std::vector<WaitState> answers(others.size());
  std::vector<MPI_Request> receives(others.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < others.size() && census_comm != MPI_COMM_NULL; ++i) {
    MPI_Request send = MPI_REQUEST_NULL;
    MPI_Isend(&ask, 1, MPI_INT64_T, others[i], kAskTag, census_comm, &send);
    MPI_Request_free(&send);
    MPI_Irecv(&answers[i], sizeof(WaitState), MPI_BYTE, others[i], kReplyTag, census_comm, &receives[i]);
  }
  std::vector<bool> answered(others.size(), false);
  const auto census_end = Clock::now() + std::chrono::duration<double>(census_grace_seconds(timeout));
  // Without mpi_initialize's census channel nobody can be asked: every peer counts as not answering.
  const auto all_answered = [&] { return std::all_of(answered.begin(), answered.end(), [](bool a) { return a; }); };
  while (census_comm != MPI_COMM_NULL && Clock::now() < census_end && !all_answered()) {
    for (size_t i = 0; i < others.size(); ++i) {
      int done = 0;
      if (!answered[i]) MPI_Test(&receives[i], &done, MPI_STATUS_IGNORE);
      if (done) answered[i] = true;
    }
    answer_census_asks();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  std::vector<std::string> missing, arrived{describe_world_rank(me)}, elsewhere;
  for (size_t i = 0; i < others.size(); ++i) {
    const WaitState& a = answers[i];
    if (!answered[i])
      missing.push_back(describe_world_rank(others[i]));
    else if (a.seq == id.seq && id.group == a.group && std::strcmp(a.op, id.op) == 0)
      arrived.push_back(describe_world_rank(others[i]));
    else
      elsewhere.push_back(fmt::format("{} waits in {} #{} on group '{}'", describe_world_rank(others[i]), a.op, a.seq,
                                      a.group));
  }
  std::string message = fmt::format("collective {} #{} on group '{}' timed out after {:g} s:", id.op, id.seq, id.group,
                                    timeout);
  if (!missing.empty())
    message += fmt::format(" {} did not arrive (no answer: stopped, dead or busy outside collectives);", join(missing));
  if (!elsewhere.empty()) message += fmt::format(" {} (collectives issued in a different order?);", join(elsewhere));
  message += fmt::format(" arrived: {}. Hint: {} or train.accelerator.dist_timeout sets the timeout in seconds",
                         join(arrived), kCollectiveTimeoutEnv);
  abort_run(message, kExitCheckFailed);
}

}  // namespace

void start_census() {
  MPI_Comm_dup(MPI_COMM_WORLD, &census_comm);
  struct Identity {
    char host[256];
    long long pid;
  } mine{};
  gethostname(mine.host, sizeof mine.host - 1);
  mine.pid = static_cast<long long>(::getpid());
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<Identity> all(static_cast<size_t>(size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  std::vector<PeerIdentity> peers;
  for (const Identity& identity : all) peers.push_back({identity.host, identity.pid});
  set_world_peers(std::move(peers));
}

void stop_census() {
  for (ReplyInFlight& reply : replies_in_flight()) MPI_Request_free(&reply.request);
  replies_in_flight().clear();
  if (census_comm != MPI_COMM_NULL) MPI_Comm_free(&census_comm);
}

int wait_collective(MPI_Request& request, const CollectiveId& id, const std::vector<int>& members) {
  int done = 0;
  int code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  if (code != MPI_SUCCESS || done) return code;
  // Not done at once: poll briefly (a peer a few microseconds late), then sleep 10 us, 20 us, ... up to 1 ms between
  // polls. The MPI progress of a collective happens inside MPI_Test, so the sleep stays short.
  constexpr auto kSpin = std::chrono::microseconds(100);
  constexpr auto kMaxSleep = std::chrono::microseconds(1000);
  const auto start = Clock::now();
  const double timeout = collective_timeout_seconds();
  copy_text(current_wait.op, sizeof current_wait.op, id.op);
  copy_text(current_wait.group, sizeof current_wait.group, id.group);
  current_wait.seq = id.seq;
  std::chrono::microseconds sleep(0);
  for (;;) {
    code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS || done) break;
    const auto waited = Clock::now() - start;
    if (waited < kSpin) continue;
    answer_census_asks();
    if (timeout > 0 && waited > std::chrono::duration<double>(timeout)) report_timeout(id, members, timeout);
    sleep = std::min(std::max(sleep * 2, std::chrono::microseconds(10)), kMaxSleep);
    std::this_thread::sleep_for(sleep);
  }
  current_wait = WaitState{};
  return code;
}

}  // namespace veomni::mpi_detail
