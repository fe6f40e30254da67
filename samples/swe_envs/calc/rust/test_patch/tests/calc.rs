use calc::{add, sub};

#[test]
fn add_works() {
    assert_eq!(add(2, 3), 5);
}

#[test]
fn sub_works() {
    assert_eq!(sub(5, 3), 2);
}
