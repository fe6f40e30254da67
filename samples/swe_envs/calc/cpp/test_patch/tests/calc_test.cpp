#include <gtest/gtest.h>
#include "../calc.hpp"

TEST(CalcTest, Add) { EXPECT_EQ(calc::add(2, 3), 5); }
TEST(CalcTest, Sub) { EXPECT_EQ(calc::sub(5, 3), 2); }
