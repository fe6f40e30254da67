package calc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Test;

class CalcTest {
    @Test
    void testAdd() { assertEquals(5, Calc.add(2, 3)); }

    @Test
    void testSub() { assertEquals(2, Calc.sub(5, 3)); }
}
