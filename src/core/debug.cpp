// placeholder: implemented in a following commit
