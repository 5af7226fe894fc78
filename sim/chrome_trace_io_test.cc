#include "sim/chrome_trace_io.h"

#include <gtest/gtest.h>

namespace monarch {
namespace {
TEST(ChromeTrace, Placeholder) { EXPECT_FALSE(chrome_trace_text(BackendResult{}, TraceMetadata{}).empty()); }
}  // namespace
}  // namespace monarch
