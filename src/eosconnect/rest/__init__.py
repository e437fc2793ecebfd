"""eosconnect.rest"""
