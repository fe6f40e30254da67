#include <gtest/gtest.h>
#include "../calc.hpp"

TEST(CalcTest, Add) { EXPECT_EQ(calc::add(2, 3), 5); }
