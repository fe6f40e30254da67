<?php
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/../src/Calc.php';

final class CalcTest extends TestCase
{
    public function testAdd(): void { $this->assertSame(5, Calc::add(2, 3)); }
}
